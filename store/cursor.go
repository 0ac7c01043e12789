package store

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// JobCursor is the position after which JobList continues: the sort key of the last job of a page.
type JobCursor struct {
	CreatedAt time.Time // microsecond precision, like the stores
	ID        string
}

// cursorVersion prefixes the encoding so that it can change without misreading old tokens.
const cursorVersion = "j1"

// EncodeJobCursor returns the opaque page token for c.
func EncodeJobCursor(c JobCursor) string {
	raw := cursorVersion + "." + strconv.FormatInt(c.CreatedAt.UnixMicro(), 10) + "." + c.ID
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// DecodeJobCursor parses a page token from a client. Anything not produced by EncodeJobCursor is
// ErrInvalidArgument: only canonical tokens are accepted.
func DecodeJobCursor(s string) (JobCursor, error) {
	raw, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return JobCursor{}, invalid("malformed page cursor")
	}
	parts := strings.Split(string(raw), ".")
	if len(parts) != 3 || parts[0] != cursorVersion {
		return JobCursor{}, invalid("malformed page cursor")
	}
	micros, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || strconv.FormatInt(micros, 10) != parts[1] {
		return JobCursor{}, invalid("malformed page cursor")
	}
	id, err := uuid.Parse(parts[2])
	if err != nil || id.String() != parts[2] {
		return JobCursor{}, invalid("malformed page cursor")
	}
	return JobCursor{CreatedAt: time.UnixMicro(micros).UTC(), ID: parts[2]}, nil
}
