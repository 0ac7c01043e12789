package postgres_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/migrations"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/postgres"
	"github.com/jq-dev/jq/store/storetest"
)

// BenchmarkStatementsAtSize runs BenchmarkStore/Statements' hot statements in a queue holding a large
// history (NFR-012): JQ_BENCH_ROWS jobs, 10 % PENDING (a backlog the claims take from,
// oldest first) and the rest DONE, in a fresh database. Skipped unless JQ_BENCH_ROWS is set:
// building 10M rows takes minutes.
//
//	JQ_BENCH_ROWS=10000000 go test -run '^$' -bench BenchmarkStatementsAtSize -benchtime 100x ./store/postgres
func BenchmarkStatementsAtSize(b *testing.B) {
	rows, _ := strconv.Atoi(os.Getenv("JQ_BENCH_ROWS"))
	if rows <= 0 {
		b.Skip("set JQ_BENCH_ROWS to the size of the history (e.g. 10000000)")
	}
	ctx := context.Background()
	dsn := testenv.NewDatabase(b)
	require.NoError(b, migrations.Up(ctx, dsn))
	st, err := postgres.New(ctx, postgres.Config{DSN: dsn, MaxConns: 4})
	require.NoError(b, err)
	b.Cleanup(st.Close)
	_, err = st.QueueCreate(ctx, store.QueueCreateParams{Name: "history"})
	require.NoError(b, err)
	start := time.Now()
	_, err = st.Pool().Exec(ctx, `INSERT INTO jobs (id, queue, type, payload, state, max_retries, spec_hash, attempt,
  created_at, updated_at, not_before, started_at, completed_at, worker_id)
SELECT gen_random_uuid(), 'history', 't', '{"n":1}'::bytea, s, 3, '\x00'::bytea, CASE WHEN s = 'DONE' THEN 1 ELSE 0 END,
  t, t, t, CASE WHEN s = 'DONE' THEN t END, CASE WHEN s = 'DONE' THEN t + interval '1 ms' END,
  CASE WHEN s = 'DONE' THEN 'w' || (g % 8) ELSE '' END
FROM (SELECT g, CASE WHEN g % 10 = 0 THEN 'PENDING' ELSE 'DONE' END AS s,
             now() - interval '1 day' + g * interval '1 ms' AS t FROM generate_series(1, $1::int) g) x`, rows)
	require.NoError(b, err)
	_, err = st.Pool().Exec(ctx, "VACUUM ANALYZE jobs")
	require.NoError(b, err)
	// The load wrote ~1 KB of WAL per row: without a checkpoint now, the one it triggers runs during
	// the measurement and every page the statements touch first is written whole to the WAL again.
	_, err = st.Pool().Exec(ctx, "CHECKPOINT")
	require.NoError(b, err)
	b.Logf("%d history rows (%d PENDING) in %v", rows, rows/10, time.Since(start).Round(time.Second))
	storetest.BenchStatements(b, st, 100, "history")
}
