package sqlstore

import (
	"strings"

	"github.com/jq-dev/jq/store"
)

// JobIDPrefixRange checks a JobPrefixList call (store.ValidateJobPrefixList) and turns the prefix —
// the leading hex digits of a job id ("885e978c", dashes allowed where a UUID has them, any case) —
// into the first and last canonical UUIDs that start with it: a range of the primary key, which
// both stores read through its index.
func JobIDPrefixRange(prefix string, limit int) (lo, hi string, err error) {
	if err := store.ValidateJobPrefixList(prefix, limit); err != nil {
		return "", "", err
	}
	digits := strings.ToLower(strings.ReplaceAll(prefix, "-", ""))
	canon := func(d string) string { return d[:8] + "-" + d[8:12] + "-" + d[12:16] + "-" + d[16:20] + "-" + d[20:] }
	return canon(digits + strings.Repeat("0", 32-len(digits))), canon(digits + strings.Repeat("f", 32-len(digits))), nil
}
