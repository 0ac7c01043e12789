package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDispatchPlans checks how SQLite runs the hot path's statements (the store never runs ANALYZE,
// so the plans do not change with the data): the due jobs walk jobs_dispatch_idx in dispatch order
// (no sort; JobDue and the untyped claim read the index alone), and the claim's update and the
// per-job statements find each row by its id.
func TestDispatchPlans(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := New(ctx, Config{Path: filepath.Join(t.TempDir(), "jq.db")})
	require.NoError(t, err)
	defer s.Close()
	plan := func(t *testing.T, q string) string {
		t.Helper()
		rows, err := s.rdb.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, "q", 1, 2, `["t"]`, 5, 6, 7, 8, 9, 10)
		require.NoError(t, err)
		defer rows.Close()
		var lines []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
			lines = append(lines, detail)
		}
		require.NoError(t, rows.Err())
		return strings.Join(lines, "\n")
	}
	for name, q := range map[string]string{"due": sqlJobDue, "claim": sqlJobClaim, "claim_typed": sqlJobClaimTyped} {
		p := plan(t, q)
		require.Contains(t, p, "INDEX jobs_dispatch_idx (queue=?)", "%s:\n%s", name, p)
		if name != "due" {
			require.Contains(t, p, "SEARCH jobs USING INDEX sqlite_autoindex_jobs_1 (id=?)", "%s: the update finds each job by id\n%s", name, p)
		}
		require.NotContains(t, p, "TEMP B-TREE", "%s: the index gives the order\n%s", name, p)
		if name != "claim_typed" {
			require.Contains(t, p, "COVERING INDEX", "%s: no table row read\n%s", name, p)
		}
	}
	for name, q := range map[string]string{"assign": sqlJobAssign, "ack": sqlJobAck, "report_read": sqlJobReportRead,
		"report_done": sqlJobReportDone, "report_failed": sqlJobReportFailed, "fail": sqlJobFail} {
		p := plan(t, q)
		require.Contains(t, p, "SEARCH jobs USING INDEX sqlite_autoindex_jobs_1 (id=?)", "%s:\n%s", name, p)
		require.NotContains(t, p, "SCAN jobs", "%s:\n%s", name, p)
	}
}
