package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"
)

// maxGroup bounds the writes committed together: a group is one transaction, and the first write
// of a group waits for the last one's commit.
const maxGroup = 256

// errClosed answers writes after Close.
var errClosed = errors.New("sqlite: the store is closed")

// writer owns the one writing connection. Every write runs in its goroutine, so writes never wait
// for SQLite's lock and never see SQLITE_BUSY from each other.
type writer struct {
	conn  *sql.Conn
	now   func() time.Time
	reqs  chan *writeReq
	quit  chan struct{}
	done  chan struct{}
	stmts map[string]*sql.Stmt // prepared on conn; used by the writer goroutine only

	stopOnce sync.Once
}

type writeReq struct {
	ctx context.Context
	fn  func(*wtx) error
	err chan error
}

func startWriter(conn *sql.Conn, now func() time.Time) *writer {
	w := &writer{conn: conn, now: now, reqs: make(chan *writeReq, maxGroup), quit: make(chan struct{}),
		done: make(chan struct{}), stmts: map[string]*sql.Stmt{}}
	go w.run()
	return w
}

// write runs fn in a transaction of the writer and returns once it is committed (nil) or rolled
// back (fn's error, or the commit's). fn must not call write (it would wait for itself), must not
// keep tx, and must leave every result it hands back to its caller unread until write returns nil.
func (s *Store) write(ctx context.Context, fn func(tx *wtx) error) error {
	r := &writeReq{ctx: ctx, fn: fn, err: make(chan error, 1)}
	select {
	case s.w.reqs <- r:
	case <-s.w.quit:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once queued the request is always answered: the writer finishes every queued request, even
	// after stop, so its outcome is known (a committed write is never reported as failed).
	return <-r.err
}

func (w *writer) stopped() bool {
	select {
	case <-w.quit:
		return true
	default:
		return false
	}
}

// stop lets the writer finish the queued writes, then closes the connection.
func (w *writer) stop() {
	w.stopOnce.Do(func() { close(w.quit) })
	<-w.done
}

func (w *writer) run() {
	defer close(w.done)
	defer func() {
		for _, st := range w.stmts {
			_ = st.Close()
		}
		_ = w.conn.Close()
	}()
	group := make([]*writeReq, 0, maxGroup)
	for {
		group = group[:0]
		select {
		case r := <-w.reqs:
			group = append(group, r)
		case <-w.quit:
			// Answer what is still queued, then stop.
			for {
				select {
				case r := <-w.reqs:
					w.commit([]*writeReq{r})
				default:
					return
				}
			}
		}
	collect:
		for len(group) < maxGroup {
			select {
			case r := <-w.reqs:
				group = append(group, r)
			default:
				break collect
			}
		}
		w.commit(group)
	}
}

// commit runs a group in one transaction: each write in a savepoint of its own, so one write's
// failure rolls back only that write.
func (w *writer) commit(group []*writeReq) {
	ctx := context.Background()
	outs := make([]error, len(group))
	if _, err := w.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		for _, r := range group {
			r.err <- errs.Wrap("begin", err)
		}
		return
	}
	applied := 0
	for i, r := range group {
		// A write alone needs no savepoint: its failure rolls back the transaction (the statement
		// journal of a savepoint costs ~10 % of the writer in a drain).
		if outs[i] = w.apply(r, len(group) > 1); outs[i] == nil {
			applied++
		}
	}
	end := "COMMIT"
	if applied == 0 {
		end = "ROLLBACK"
	}
	if _, err := w.conn.ExecContext(ctx, end); err != nil {
		_, _ = w.conn.ExecContext(ctx, "ROLLBACK")
		for i := range outs {
			if outs[i] == nil {
				outs[i] = errs.Wrap("commit", err)
			}
		}
	}
	for i, r := range group {
		r.err <- outs[i]
	}
}

// apply runs one write of a group; with savepoint, in a savepoint of its own, so that its failure
// rolls back that write alone.
func (w *writer) apply(r *writeReq, savepoint bool) error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	tx := &wtx{ctx: r.ctx, w: w, now: w.now().UTC().Truncate(time.Microsecond)}
	if !savepoint {
		return r.fn(tx)
	}
	ctx := context.Background()
	if _, err := w.conn.ExecContext(ctx, "SAVEPOINT w"); err != nil {
		return errs.Wrap("savepoint", err)
	}
	err := r.fn(tx)
	if err != nil {
		if _, rerr := w.conn.ExecContext(ctx, "ROLLBACK TO w"); rerr != nil {
			err = errors.Join(err, fmt.Errorf("sqlite: rollback to savepoint: %w", rerr))
		}
	}
	if _, rerr := w.conn.ExecContext(ctx, "RELEASE w"); rerr != nil && err == nil {
		err = fmt.Errorf("sqlite: release savepoint: %w", rerr)
	}
	return err
}

// wtx is one write's view of the writer's transaction.
type wtx struct {
	ctx context.Context
	w   *writer
	// now is the write's time: every timestamp the write stores unless it says otherwise (as
	// Postgres's now(), fixed for the write).
	now time.Time
}

func (t *wtx) prepared(q string) (*sql.Stmt, error) {
	if st, ok := t.w.stmts[q]; ok {
		return st, nil
	}
	st, err := t.w.conn.PrepareContext(context.Background(), q)
	if err != nil {
		return nil, err
	}
	t.w.stmts[q] = st
	return st, nil
}

func (t *wtx) exec(q string, args ...any) (sql.Result, error) {
	st, err := t.prepared(q) //nolint:sqlclosecheck // cached for the writer's life, closed when it stops
	if err != nil {
		return nil, err
	}
	return st.ExecContext(t.ctx, args...)
}

func (t *wtx) query(q string, args ...any) (*sql.Rows, error) {
	st, err := t.prepared(q) //nolint:sqlclosecheck // cached for the writer's life, closed when it stops
	if err != nil {
		return nil, err
	}
	return st.QueryContext(t.ctx, args...)
}

func (t *wtx) queryRow(q string, args ...any) *sql.Row {
	st, err := t.prepared(q) //nolint:sqlclosecheck // cached for the writer's life, closed when it stops
	if err != nil {
		return t.w.conn.QueryRowContext(t.ctx, q, args...)
	}
	return st.QueryRowContext(t.ctx, args...)
}
