package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jq-dev/jq/internal/term"

	"github.com/dustin/go-humanize"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jq-dev/jq/api"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
)

// The human (table) format: aligned columns, times absolute (UTC, RFC 3339)
// and relative, colour only when stdout is a terminal.

// colorWanted reports whether w is a terminal and the environment does not
// refuse colour (https://no-color.org, TERM=dumb).
func colorWanted(w io.Writer, getenv func(string) string) bool {
	if getenv("NO_COLOR") != "" || getenv("TERM") == "dumb" {
		return false
	}
	return term.IsTerminal(w)
}

// ANSI colours. Every code has two digits, so every painted cell grows by
// the same number of bytes and tabwriter's columns stay aligned as long as a
// column is painted in every row (its header included, with colDefault).
const (
	colRed     = "31"
	colGreen   = "32"
	colYellow  = "33"
	colCyan    = "36"
	colDefault = "39"
)

// paint colours s when colour is on.
func (re *runEnv) paint(code, s string) string {
	if !re.color {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// header paints a column header of a painted column so it aligns.
func (re *runEnv) header(s string) string { return re.paint(colDefault, s) }

var stateColors = map[jqv1.JobState]string{
	jqv1.JobState_JOB_STATE_PENDING:       colYellow,
	jqv1.JobState_JOB_STATE_ASSIGNED:      colCyan,
	jqv1.JobState_JOB_STATE_RUNNING:       colCyan,
	jqv1.JobState_JOB_STATE_DONE:          colGreen,
	jqv1.JobState_JOB_STATE_FAILED:        colRed,
	jqv1.JobState_JOB_STATE_DEAD_LETTERED: colRed,
}

// stateName is a job state without its enum prefix: DEAD_LETTERED.
func stateName(s jqv1.JobState) string {
	return strings.TrimPrefix(s.String(), "JOB_STATE_")
}

func (re *runEnv) state(s jqv1.JobState) string {
	c, ok := stateColors[s]
	if !ok {
		c = colDefault
	}
	return re.paint(c, stateName(s))
}

func workerStatusName(s jqv1.WorkerStatus) string {
	return strings.TrimPrefix(s.String(), "WORKER_STATUS_")
}

func (re *runEnv) workerStatus(s jqv1.WorkerStatus) string {
	c := colDefault
	switch s {
	case jqv1.WorkerStatus_WORKER_STATUS_ONLINE:
		c = colGreen
	case jqv1.WorkerStatus_WORKER_STATUS_DRAINING:
		c = colYellow
	case jqv1.WorkerStatus_WORKER_STATUS_OFFLINE:
		c = colRed
	}
	return re.paint(c, workerStatusName(s))
}

// when renders a time as "2025-01-02T15:04:05Z (3m ago)"; "-" when unset.
func (re *runEnv) when(t *timestamppb.Timestamp) string {
	if t == nil {
		return "-"
	}
	at := t.AsTime()
	return at.UTC().Format(time.RFC3339) + " (" + relative(re.now().Sub(at)) + ")"
}

// ago is the relative part alone, for narrow columns.
func (re *runEnv) ago(t *timestamppb.Timestamp) string {
	if t == nil {
		return "-"
	}
	return relative(re.now().Sub(t.AsTime()))
}

// ageMagnitudes are the steps of an age in a table cell: whole seconds, minutes, hours up to two
// days, then days — short enough for a column, precise enough to tell a stuck job from a slow one.
var ageMagnitudes = []humanize.RelTimeMagnitude{
	{D: time.Second, Format: "just now", DivBy: time.Second},
	{D: time.Minute, Format: "%ds %s", DivBy: time.Second},
	{D: time.Hour, Format: "%dm %s", DivBy: time.Minute},
	{D: 48 * time.Hour, Format: "%dh %s", DivBy: time.Hour},
	{D: math.MaxInt64, Format: "%dd %s", DivBy: 24 * time.Hour},
}

// relative renders an age with go-humanize: "just now", "42s ago", "3m ago", "5h ago", "2d ago";
// a negative age is "in 10s".
func relative(age time.Duration) string {
	var t0 time.Time
	if age < 0 {
		if s := humanize.CustomRelTime(t0, t0.Add(-age), "", "", ageMagnitudes); s != "just now" {
			return "in " + s
		}
		return "just now"
	}
	return humanize.CustomRelTime(t0, t0.Add(age), "ago", "", ageMagnitudes)
}

// duration renders a protobuf duration; "-" when unset.
func duration(d *durationpb.Duration) string {
	if d == nil {
		return "-"
	}
	return shortDuration(d.AsDuration())
}

// shortDuration rounds to what a human reads: 1.5s, 250ms, 3m0s.
func shortDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(100 * time.Microsecond).String()
	case d < time.Minute:
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// maxCell bounds payloads and results shown in a table.
const maxCell = 200

// bytesText renders payload or result bytes for a table: compact JSON, or
// other printable UTF-8 on one line, shortened past maxCell; else a size.
// isBinary reports whether b is not text: invalid UTF-8, or control characters other than
// newlines and tabs.
func isBinary(b []byte) bool {
	return !utf8.Valid(b) || strings.ContainsFunc(string(b), func(r rune) bool {
		return r < ' ' && r != '\n' && r != '\t' && r != '\r'
	})
}

func bytesText(b []byte) string {
	if len(b) == 0 {
		return "(empty)"
	}
	var s string
	var compact bytes.Buffer
	if j, ok := api.MsgPackJSON(b, ""); ok {
		s = "(MessagePack) " + string(j)
	} else if isBinary(b) {
		return fmt.Sprintf("(%d bytes, binary; --output json shows them in base64)", len(b))
	} else if json.Compact(&compact, b) == nil {
		s = compact.String()
	} else {
		s = strings.Join(strings.Fields(string(b)), " ")
	}
	if utf8.RuneCountInString(s) > maxCell {
		r := []rune(s)
		return cell(string(r[:maxCell])) + fmt.Sprintf("… (%d bytes; --output json shows all)", len(b))
	}
	return cell(s)
}

// newTable is the tabwriter of every table.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// dash stands in for an empty cell, so columns never collapse. It escapes s
// like cell.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return cell(s)
}

// cell makes text from the server safe to print on a terminal: control
// characters (C0, DEL, C1: ESC starts every ANSI sequence, and a tab or a
// newline would break the table), Unicode's line separators and the
// bidirectional overrides that reorder what follows are written as Go escapes
// (\x1b, \n, \u202e), as are invalid UTF-8 bytes; all other text, Unicode
// included, is kept. Every string from the server goes through cell (or
// dash) before it is printed in a table or a message.
func cell(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c == 0x7f || c >= utf8.RuneSelf {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// unsafeRune reports whether r may change what a terminal shows beyond
// itself.
func unsafeRune(r rune) bool {
	switch {
	case unicode.IsControl(r): // C0, DEL, C1 (U+009B is a one-byte CSI)
		return true
	case r == '\u2028', r == '\u2029': // line and paragraph separators
		return true
	case r == '\u061c', r == '\u200e', r == '\u200f', // bidirectional marks and overrides
		r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069':
		return true
	}
	return false
}
