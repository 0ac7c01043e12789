package postgres

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/queue"
)

// BenchmarkDispatchEncoding backs the choice of parallel arrays over one JSON parameter for the batch
// statements (see dispatch.go). The two differ only in how the input CTE receives the items, so it
// times just that, for 1,000-item batches: encoding in Go, the round trip, and the server decoding
// every column — the input CTE of sqlJobReportMany and sqlJobAckMany as they are, against
// json_to_recordset versions of the same columns.
func BenchmarkDispatchEncoding(b *testing.B) {
	const n = 1000
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testenv.NewDatabase(b))
	require.NoError(b, err)
	defer conn.Close(ctx)

	type item struct {
		ID       string `json:"id"`
		Attempt  int    `json:"attempt"`
		Worker   string `json:"worker"`
		Success  bool   `json:"success"`
		Result   []byte `json:"result"` // base64
		Checksum string `json:"checksum"`
		Error    string `json:"error"`
		Reason   string `json:"reason"`
	}
	items := make([]item, n)
	for i := range items {
		result := make([]byte, 64)
		items[i] = item{ID: uuid.NewString(), Attempt: 1, Worker: "worker-1", Success: i%2 == 0, Result: result,
			Checksum: queue.Checksum(result), Error: "boom", Reason: "error"}
	}
	const consume = `
SELECT count(i_id), sum(i_attempt), max(i_worker), bool_or(i_success), sum(length(i_result)), max(i_checksum),
       max(i_error), max(i_reason), max(i_ord)
FROM input`
	reportJSON := `WITH input AS (
    SELECT i_id, i_attempt, i_worker, i_success, decode(i_result, 'base64') AS i_result, i_checksum, i_error,
           i_reason, i_ord
    FROM ROWS FROM (json_to_recordset($1::json) AS (id uuid, attempt integer, worker text, success boolean,
                    result text, checksum text, error text, reason text))
        WITH ORDINALITY AS t(i_id, i_attempt, i_worker, i_success, i_result, i_checksum, i_error, i_reason, i_ord)
)` + consume
	ackJSON := `WITH input AS (
    SELECT * FROM ROWS FROM (json_to_recordset($1::json) AS (id uuid, attempt integer, worker text))
        WITH ORDINALITY AS t(i_id, i_attempt, i_worker, i_ord)
)` + consume
	ackConsume := strings.NewReplacer("max(i_ord)", "max(i_ord)", "bool_or(i_success)", "true",
		"sum(length(i_result))", "0", "max(i_checksum)", "''", "max(i_error)", "''", "max(i_reason)", "''").Replace(consume)
	ackJSON = strings.Replace(ackJSON, consume, ackConsume, 1)

	run := func(b *testing.B, query func() (string, []any)) {
		b.ReportAllocs()
		for b.Loop() {
			sql, args := query()
			if _, err := conn.Exec(ctx, sql, args...); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "items/s")
	}
	b.Run("report/arrays", func(b *testing.B) {
		sql := inputCTE(b, sqlJobReportMany) + consume
		run(b, func() (string, []any) {
			var (
				ids, workers, checksums, errs, reasons = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
				attempts                               = make([]int32, n)
				successes                              = make([]bool, n)
				results                                = make([][]byte, n)
			)
			for i, it := range items {
				ids[i], attempts[i], workers[i], successes[i] = it.ID, int32(it.Attempt), it.Worker, it.Success
				results[i], checksums[i], errs[i], reasons[i] = it.Result, it.Checksum, it.Error, it.Reason
			}
			return sql, []any{ids, attempts, workers, successes, results, checksums, errs, reasons, make([]bool, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]string, n)}
		})
	})
	b.Run("report/json", func(b *testing.B) {
		run(b, func() (string, []any) {
			doc, err := json.Marshal(items)
			require.NoError(b, err)
			return reportJSON, []any{string(doc)}
		})
	})
	b.Run("ack/arrays", func(b *testing.B) {
		sql := inputCTE(b, sqlJobAckMany) + ackConsume
		run(b, func() (string, []any) {
			ids, attempts, workers := make([]string, n), make([]int32, n), make([]string, n)
			for i, it := range items {
				ids[i], attempts[i], workers[i] = it.ID, int32(it.Attempt), it.Worker
			}
			return sql, []any{ids, attempts, workers, make([]int64, n)}
		})
	})
	b.Run("ack/json", func(b *testing.B) {
		type lease struct {
			ID      string `json:"id"`
			Attempt int    `json:"attempt"`
			Worker  string `json:"worker"`
		}
		run(b, func() (string, []any) {
			leases := make([]lease, n)
			for i, it := range items {
				leases[i] = lease{it.ID, it.Attempt, it.Worker}
			}
			doc, err := json.Marshal(leases)
			require.NoError(b, err)
			return ackJSON, []any{string(doc)}
		})
	})
}

// inputCTE returns the input CTE that opens a batch statement.
func inputCTE(tb testing.TB, sql string) string {
	tb.Helper()
	end := strings.Index(sql, "\n),\n")
	_, body, _ := strings.Cut(sql, "\n") // the name comment
	require.True(tb, strings.HasPrefix(strings.TrimSpace(body), "WITH input AS (") && end > 0, "no input CTE")
	return sql[:end] + "\n)"
}
