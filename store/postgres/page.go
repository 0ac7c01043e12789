package postgres

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

// sqlJobData reads the payloads and results of a page's jobs once the page is cut to its budget.
const sqlJobData = `-- name: job_data
SELECT id::text, payload, result FROM jobs WHERE id = ANY($1::uuid[])`

// jobPage runs a page query that selects jobPageColumns and returns its jobs, cut to maxBytes
// (sqlstore.PageCut over sqlstore.JobPageBytes), and whether the budget cut it. Only the first candidates
// rows can be in the page; a row after them is a lookahead that tells whether more exist, and is
// returned only when the budget did not cut the page. With withData the kept jobs' payloads
// and results are read afterwards, in the same snapshot (a read-only repeatable-read transaction); the rows of the page query never carry them,
// so what a page holds in memory at once is its metadata plus at most maxBytes (and one job) of data.
func (s *Store) jobPage(ctx context.Context, candidates int, withData bool, maxBytes int, q string, args ...any) (jobs []*queue.Job, cut bool, err error) {
	return s.jobPageBounded(ctx, 0, candidates, withData, maxBytes, q, args...)
}

// jobPageBounded is jobPage with a statement_timeout of bound (0: none) on the page's statements;
// a statement it stops fails with SQLSTATE 57014 (query_canceled).
func (s *Store) jobPageBounded(ctx context.Context, bound time.Duration, candidates int, withData bool, maxBytes int, q string, args ...any) (jobs []*queue.Job, cut bool, err error) {
	page := func(tx querier) error {
		rows, err := tx.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		var sizes []int64
		jobs, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (*queue.Job, error) {
			var payloadBytes, resultBytes int64
			j, err := scanJob(r, &payloadBytes, &resultBytes)
			if err != nil {
				return nil, err
			}
			var data int64
			if withData {
				data = payloadBytes + resultBytes
			}
			sizes = append(sizes, sqlstore.JobPageBytes(j, data))
			return j, nil
		})
		if err != nil {
			return err
		}
		k := min(len(jobs), candidates)
		if n := sqlstore.PageCut(sizes[:k], maxBytes); n < k {
			jobs, cut = jobs[:n], true
		}
		if withData && len(jobs) > 0 {
			return readJobData(ctx, tx, jobs[:min(len(jobs), candidates)])
		}
		return nil
	}
	if !withData && bound <= 0 {
		return jobs, cut, page(s.pool)
	}
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			if bound > 0 {
				if _, err := tx.Exec(ctx, "SELECT set_config('statement_timeout', $1, true)",
					strconv.FormatInt(bound.Milliseconds(), 10)); err != nil {
					return err
				}
			}
			return page(tx)
		})
	return jobs, cut, err
}

func readJobData(ctx context.Context, tx querier, jobs []*queue.Job) error {
	byID := make(map[string]*queue.Job, len(jobs))
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		byID[j.ID], ids[i] = j, j.ID
	}
	rows, err := tx.Query(ctx, sqlJobData, ids)
	if err != nil {
		return err
	}
	var (
		id              string
		payload, result []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &payload, &result}, func() error {
		if j := byID[id]; j != nil {
			j.Payload, j.Result = payload, result
			if j.Payload == nil {
				j.Payload = []byte{}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read job data: %w", err)
	}
	return nil
}
