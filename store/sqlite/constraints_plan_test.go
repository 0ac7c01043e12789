package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestConstraintPlans checks how SQLite runs a constrained claim's reads: the running jobs (and a
// usage report's) come from jobs_limited_idx alone (as many entries as jobs run under constraints, no table row), and
// each step's candidates walk jobs_dispatch_idx in the step's order (no sort, but for the aged
// step's due time, as in the weighted claim); the writes find each job by its id.
func TestConstraintPlans(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := New(ctx, Config{Path: filepath.Join(t.TempDir(), "jq.db")})
	require.NoError(t, err)
	defer s.Close()
	plan := func(t *testing.T, q string, args ...any) string {
		t.Helper()
		rows, err := s.rdb.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, args...)
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
	for name, q := range map[string]string{"running": sqlConstraintRunning, "usage": sqlConstraintKeyUsage} {
		p := plan(t, q, `["c"]`)
		require.Contains(t, p, "SEARCH j USING COVERING INDEX jobs_limited_idx", "%s:\n%s", name, p)
	}

	for name, q := range map[string]string{"level": sqlCandidateLevel, "rest": sqlCandidateRest} {
		args := []any{"q", 1, 2, `["t"]`, `[]`, `["c:k"]`, 3, nil, blockedSingles([]string{"c:k"})}
		if name == "level" {
			args[7] = 4
		}
		p := plan(t, candidateSelect(true)+q, args...)
		require.Contains(t, p, "INDEX jobs_dispatch_idx (queue=?", "%s:\n%s", name, p)
		require.NotContains(t, p, "TEMP B-TREE", "%s: the index gives the order\n%s", name, p)
	}
	for name, q := range map[string]string{"key": sqlJobSetLimitKeys, "assign": sqlJobAssignLimited} {
		p := plan(t, q, "id", "w", 1, `["c:k"]`, 2)
		require.Contains(t, p, "SEARCH jobs USING INDEX sqlite_autoindex_jobs_1 (id=?)", "%s:\n%s", name, p)
	}
}
