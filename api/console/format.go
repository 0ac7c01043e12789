package console

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
)

// maxShownBytes bounds how much of a payload or result a page shows.
const maxShownBytes = 64 << 10

// shown is a payload or result as a page shows it: its format and its text.
type shown struct {
	Format string // "JSON", "MessagePack", "text", "binary" or "" (empty)
	Text   string
	Size   int
	Cut    bool // Text shows only the first maxShownBytes
}

// show pretty-prints JSON and MessagePack (as JSON), shows UTF-8 text as it is and anything else
// as a hex dump. The template escapes the text.
func show(b []byte) shown {
	s := shown{Size: len(b)}
	if len(b) == 0 {
		return s
	}
	var out bytes.Buffer
	switch {
	case json.Valid(b) && json.Indent(&out, b, "", "  ") == nil:
		s.Format = "JSON"
	case msgpackJSON(b, &out):
		s.Format = "MessagePack"
	case utf8.Valid(b):
		s.Format = "text"
		out.Write(b)
	default:
		s.Format = "binary"
		out.WriteString(hex.Dump(b[:min(len(b), maxShownBytes/4)]))
		s.Cut = len(b) > maxShownBytes/4
	}
	s.Text = out.String()
	if len(s.Text) > maxShownBytes {
		s.Text, s.Cut = strings.ToValidUTF8(s.Text[:maxShownBytes], ""), true
	}
	return s
}

// msgpackJSON writes b, when it is exactly one MessagePack map or array, as indented JSON. A
// scalar is not taken for MessagePack: most short texts would decode as one.
func msgpackJSON(b []byte, out *bytes.Buffer) bool {
	if c := b[0]; !(c >= 0x80 && c <= 0x9f || c == 0xdc || c == 0xdd || c == 0xde || c == 0xdf) {
		return false
	}
	r := bytes.NewReader(b) // an io.ByteScanner: the decoder reads it directly, without a buffer
	v, err := msgpack.NewDecoder(r).DecodeInterface()
	if err != nil || r.Len() > 0 { // trailing bytes: not one value
		return false
	}
	j, err := json.MarshalIndent(jsonable(v), "", "  ")
	if err != nil {
		return false
	}
	out.Write(j)
	return true
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

// traceID is the trace id of a W3C traceparent ("00-<32 hex>-<16 hex>-<2 hex>"); "" without a
// valid one.
func traceID(tc map[string]string) string {
	parts := strings.Split(tc["traceparent"], "-")
	if len(parts) != 4 || len(parts[1]) != 32 {
		return ""
	}
	if _, err := hex.DecodeString(parts[1]); err != nil || parts[1] == strings.Repeat("0", 32) {
		return ""
	}
	return strings.ToLower(parts[1])
}

// eventRow is one transition of a job's timeline, with the time since the previous one.
type eventRow struct {
	Event *jqv1.JobEvent
	After time.Duration // since the previous event; 0 for the first
	First bool          // the first event of its attempt
}

func timeline(events []*jqv1.JobEvent) []eventRow {
	rows := make([]eventRow, len(events))
	for i, e := range events {
		rows[i].Event = e
		if i > 0 {
			prev := events[i-1]
			rows[i].After = e.GetTimestamp().AsTime().Sub(prev.GetTimestamp().AsTime())
			rows[i].First = e.GetAttempt() != prev.GetAttempt()
		}
	}
	return rows
}
