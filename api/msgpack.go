package api

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"
)

// MsgPackJSON returns b as JSON when it is exactly one MessagePack map or array (indented by indent,
// compact when ""), for displays of payloads and results (the console, the CLI's job status). A
// scalar is not taken for MessagePack: most short texts would decode as one.
func MsgPackJSON(b []byte, indent string) ([]byte, bool) {
	if len(b) == 0 {
		return nil, false
	}
	if c := b[0]; !(c >= 0x80 && c <= 0x9f || c == 0xdc || c == 0xdd || c == 0xde || c == 0xdf) {
		return nil, false
	}
	r := bytes.NewReader(b) // an io.ByteScanner: the decoder reads it directly, without a buffer
	v, err := msgpack.NewDecoder(r).DecodeInterface()
	if err != nil || r.Len() > 0 { // trailing bytes: not one value
		return nil, false
	}
	var j []byte
	if indent == "" {
		j, err = json.Marshal(jsonable(v))
	} else {
		j, err = json.MarshalIndent(jsonable(v), "", indent)
	}
	if err != nil {
		return nil, false
	}
	return j, true
}

// jsonable turns MessagePack's maps with non-string keys and its binary strings into values
// encoding/json can write.
func jsonable(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = jsonable(e)
		}
		return t
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case []any:
		for i, e := range t {
			t[i] = jsonable(e)
		}
		return t
	case []byte:
		if utf8.Valid(t) {
			return string(t)
		}
		return hex.EncodeToString(t)
	case time.Time:
		return t.UTC().Format(time.RFC3339Nano)
	default:
		return v
	}
}
