package console

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jq-dev/jq/api"
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

// msgpackJSON writes b, when it is exactly one MessagePack map or array, as indented JSON
// (api.MsgPackJSON, which the CLI's job status uses too).
func msgpackJSON(b []byte, out *bytes.Buffer) bool {
	j, ok := api.MsgPackJSON(b, "  ")
	if ok {
		out.Write(j)
	}
	return ok
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
