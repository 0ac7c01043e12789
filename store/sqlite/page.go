package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

// pageQuery is one statement of a page: it selects jobPageColumns.
type pageQuery struct {
	sql  string
	args []any
}

// errPageBound is returned by jobPages when bound stopped the page's statements.
var errPageBound = fmt.Errorf("sqlite: page search bound reached")

// jobPage runs a page query that selects jobPageColumns and returns its jobs, cut to maxBytes
// (sqlstore.PageCut over sqlstore.JobPageBytes), and whether the budget cut it. Only the first
// candidates rows can be in the page; a row after them is a lookahead that tells whether more
// exist. With withData the kept jobs' payloads and results are read afterwards, in the same read
// transaction (one snapshot).
func (s *Store) jobPage(ctx context.Context, candidates int, withData bool, maxBytes int, q string, args ...any) ([]*queue.Job, bool, error) {
	return s.jobPages(ctx, 0, candidates, withData, maxBytes, nil, pageQuery{q, args})
}

// jobPages is jobPage over several statements whose rows are merged in the order less (nil: one
// statement, already in order), keeping candidates+1 of them, with the statements stopped after
// bound (0: none; errPageBound).
func (s *Store) jobPages(ctx context.Context, bound time.Duration, candidates int, withData bool, maxBytes int,
	less func(a, b *queue.Job) int, qs ...pageQuery) (jobs []*queue.Job, cut bool, err error) {
	qctx := ctx
	if bound > 0 {
		var cancel context.CancelFunc
		qctx, cancel = context.WithTimeout(ctx, bound)
		defer cancel()
	}
	tx, err := s.rdb.BeginTx(qctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, false, boundErr(ctx, qctx, err)
	}
	defer func() { _ = tx.Rollback() }()
	type sized struct {
		j    *queue.Job
		size int64
	}
	var all []sized
	for _, q := range qs {
		st, err := s.rstmt(qctx, q.sql)
		if err != nil {
			return nil, false, boundErr(ctx, qctx, err)
		}
		rows, err := tx.StmtContext(qctx, st).QueryContext(qctx, q.args...) //nolint:sqlclosecheck // collect closes it
		if err != nil {
			return nil, false, boundErr(ctx, qctx, err)
		}
		got, err := collect(rows, func(r scanner) (sized, error) {
			var payloadBytes, resultBytes int64
			j, err := scanJob(r, &payloadBytes, &resultBytes)
			if err != nil {
				return sized{}, err
			}
			var data int64
			if withData {
				data = payloadBytes + resultBytes
			}
			return sized{j, sqlstore.JobPageBytes(j, data)}, nil
		})
		if err != nil {
			return nil, false, boundErr(ctx, qctx, err)
		}
		all = append(all, got...)
	}
	if less != nil && len(qs) > 1 {
		slices.SortStableFunc(all, func(a, b sized) int { return less(a.j, b.j) })
		all = all[:min(len(all), candidates+1)]
	}
	jobs = make([]*queue.Job, len(all))
	sizes := make([]int64, len(all))
	for i, r := range all {
		jobs[i], sizes[i] = r.j, r.size
	}
	k := min(len(jobs), candidates)
	if n := sqlstore.PageCut(sizes[:k], maxBytes); n < k {
		jobs, cut = jobs[:n], true
	}
	if withData && len(jobs) > 0 {
		if err := readJobData(qctx, tx, jobs[:min(len(jobs), candidates)]); err != nil {
			return nil, false, boundErr(ctx, qctx, err)
		}
	}
	return jobs, cut, nil
}

// boundErr is errPageBound when the bound's deadline, not the caller's, stopped the statement.
func boundErr(ctx, qctx context.Context, err error) error {
	if qctx != ctx && qctx.Err() != nil && ctx.Err() == nil {
		return errPageBound
	}
	return err
}

func readJobData(ctx context.Context, tx *sql.Tx, jobs []*queue.Job) error {
	byID := make(map[string]*queue.Job, len(jobs))
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		byID[j.ID], ids[i] = j, j.ID
	}
	rows, err := tx.QueryContext(ctx, sqlJobData, listText(ids))
	if err != nil {
		return fmt.Errorf("read job data: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id              string
			payload, result []byte
		)
		if err := rows.Scan(&id, &payload, blob{&result}); err != nil {
			return fmt.Errorf("read job data: %w", err)
		}
		if j := byID[id]; j != nil {
			j.Payload, j.Result = payload, result
			if j.Payload == nil {
				j.Payload = []byte{}
			}
		}
	}
	return rows.Err()
}

// sqlJobData reads the payloads and results of a page's jobs (?1: a JSON array of ids) once the
// page is cut to its budget.
const sqlJobData = `SELECT id, payload, result FROM jobs WHERE id IN (SELECT value FROM json_each(?1))`
