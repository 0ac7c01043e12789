package store

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/jq-dev/jq/queue"
)

// JobCursor is the position after which JobList continues: the sort key of the last job of a page,
// and the fingerprint of the filters of the listing it belongs to.
type JobCursor struct {
	CreatedAt time.Time // microsecond precision, like the stores
	ID        string
	// Filter fingerprints the filters the cursor was issued for (JobListParams.CursorAfter), so a
	// page token replayed with another queue, states or labels is refused instead of continuing a
	// different listing from a position that means nothing there.
	Filter uint64
}

// cursorVersion prefixes the encoding so that it can change without misreading old tokens. j1
// tokens (without the filter) are refused as malformed; a client starts its listing again.
const cursorVersion = "j2"

// encodeJobCursor returns the opaque page token for c.
func encodeJobCursor(c JobCursor) string {
	raw := cursorVersion + "." + strconv.FormatInt(c.CreatedAt.UnixMicro(), 10) + "." + c.ID + "." +
		strconv.FormatUint(c.Filter, 16)
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// decodeJobCursor parses a page token from a client. Anything not produced by encodeJobCursor is
// ErrInvalidArgument: only canonical tokens are accepted. (Strict base64 still skips '\r' and '\n',
// and a number or UUID has other spellings, hence the final comparison with the re-encoding.)
func decodeJobCursor(s string) (JobCursor, error) {
	malformed := invalid("malformed page_token (pass next_page_token unchanged, or none for the first page)")
	raw, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return JobCursor{}, malformed
	}
	parts := strings.Split(string(raw), ".")
	if len(parts) != 4 || parts[0] != cursorVersion {
		return JobCursor{}, malformed
	}
	micros, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return JobCursor{}, malformed
	}
	id, err := uuid.Parse(parts[2])
	if err != nil {
		return JobCursor{}, malformed
	}
	filter, err := strconv.ParseUint(parts[3], 16, 64)
	if err != nil {
		return JobCursor{}, malformed
	}
	c := JobCursor{CreatedAt: time.UnixMicro(micros).UTC(), ID: id.String(), Filter: filter}
	if encodeJobCursor(c) != s {
		return JobCursor{}, malformed
	}
	return c, nil
}

// CursorAfter is the page token that continues this listing after job j.
func (p JobListParams) CursorAfter(j *queue.Job) string {
	return encodeJobCursor(JobCursor{CreatedAt: j.CreatedAt, ID: j.ID, Filter: p.filterHash()})
}

// filterHash fingerprints the filters of a listing: the queue, the set of states, the labels, the
// cancelled filter, the direction and the principal whose jobs are listed,
// in a canonical order (the same states in another order, or repeated, are the same listing).
// The page size is not part of it: a client may change it between pages.
func (p JobListParams) filterHash() uint64 {
	h := sha256.New()
	w := specWriter{h: h}
	w.str("jq.job-list-filter.v1")
	w.str(p.Queue)
	states := make([]string, len(p.States))
	for i, s := range p.States {
		states[i] = string(s)
	}
	slices.Sort(states)
	states = slices.Compact(states)
	w.int(int64(len(states)))
	for _, s := range states {
		w.str(s)
	}
	w.labels(p.Labels)
	// The filters added later enter only when set, so that tokens issued before them still match.
	if len(p.CancelledIn) > 0 {
		w.str("cancelled_in")
		for _, st := range queue.States() {
			if c, ok := p.CancelledIn[st]; ok {
				w.str(string(st))
				w.str(strconv.FormatBool(c))
			}
		}
	}
	if p.Ascending {
		w.str("ascending")
	}
	if p.Principal != "" { // a producer's own listing (tokens issued before principals still match)
		w.str("principal")
		w.str(p.Principal)
	}
	if p.Type != "" {
		w.str("type")
		w.str(p.Type)
	}
	for _, t := range []struct {
		name string
		at   time.Time
	}{{"created_after", p.CreatedAfter}, {"created_before", p.CreatedBefore},
		{"completed_after", p.CompletedAfter}, {"completed_before", p.CompletedBefore}} {
		if !t.at.IsZero() {
			w.str(t.name)
			w.int(t.at.UnixNano())
		}
	}
	if p.Scheduled {
		w.str("scheduled")
	}
	return binary.BigEndian.Uint64(h.Sum(nil))
}
