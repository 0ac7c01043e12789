package handlers

import (
	"encoding/json"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/jq-dev/jq/queue"
)

// isMsgPackMap reports whether a payload starts with a MessagePack map header (fixmap 0x80-0x8f,
// map16 0xde, map32 0xdf): the bytes a client's map payload holds when it was submitted with the
// msgpack codec. No JSON text starts with these bytes, so the check cannot mistake one for the
// other; it looks at the first byte before any trimming, which would damage MessagePack.
func isMsgPackMap(payload []byte) bool {
	if len(payload) == 0 {
		return false
	}
	c := payload[0]
	return c&0xf0 == 0x80 || c == 0xde || c == 0xdf
}

// msgPackAsJSON re-encodes a MessagePack map as JSON, so the built-in handlers decode both
// encodings with one strict path (unknown fields refused alike).
func msgPackAsJSON(typ string, payload []byte) ([]byte, error) {
	var m map[string]any
	if err := msgpack.Unmarshal(payload, &m); err != nil {
		return nil, queue.Permanent(fmt.Errorf("%s: invalid MessagePack payload: %w", typ, err))
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, queue.Permanent(fmt.Errorf("%s: MessagePack payload has no JSON form: %w", typ, err))
	}
	return b, nil
}
