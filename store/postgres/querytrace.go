package postgres

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Every statement of this package starts with a name comment, `-- name: job_ack_many`, on its
// first line. The query tracer labels its duration with that name (jq_db_query_duration_seconds
// {query_name}), and the comment travels with the statement, so pg_stat_statements and
// pg_stat_activity show it too. A statement without one is "other" (pgx's own, such as the
// pool's ping, or a statement someone forgot to name).

// QueryObserver receives the duration of every statement the store runs, by name. err is the
// statement's error (nil on success). It must be fast and safe for concurrent use.
type QueryObserver func(name string, d time.Duration, err error)

// UnnamedQuery is the name of a statement without a name comment.
const UnnamedQuery = "other"

const namePrefix = "-- name: "

// QueryName returns the name in sql's leading name comment, or UnnamedQuery.
func QueryName(sql string) string {
	sql = strings.TrimLeft(sql, " \t\r\n")
	if !strings.HasPrefix(sql, namePrefix) {
		return UnnamedQuery
	}
	sql = sql[len(namePrefix):]
	if i := strings.IndexAny(sql, "\r\n"); i >= 0 {
		sql = sql[:i]
	}
	if name := strings.TrimSpace(sql); name != "" {
		return name
	}
	return UnnamedQuery
}

// queryTracer is a pgx QueryTracer, BatchTracer and CopyFromTracer that times statements. A batch
// is observed once, under the name of its first statement prefixed "batch:"; a COPY under
// "copy:<table>".
type queryTracer struct {
	observe QueryObserver
}

type traceKey struct{}

type traceStart struct {
	name  string
	start time.Time
}

func (t queryTracer) begin(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, traceKey{}, &traceStart{name: name, start: time.Now()})
}

func (t queryTracer) end(ctx context.Context, err error) {
	if s, ok := ctx.Value(traceKey{}).(*traceStart); ok && s.name != "" {
		t.observe(s.name, time.Since(s.start), err)
	}
}

func (t queryTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	return t.begin(ctx, QueryName(data.SQL))
}

func (t queryTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	t.end(ctx, data.Err)
}

func (t queryTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	// The name is known at the first queued statement.
	name := "batch"
	if data.Batch != nil && len(data.Batch.QueuedQueries) > 0 {
		name = "batch:" + QueryName(data.Batch.QueuedQueries[0].SQL)
	}
	return t.begin(ctx, name)
}

func (t queryTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (t queryTracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchEndData) {
	t.end(ctx, data.Err)
}

func (t queryTracer) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceCopyFromStartData) context.Context {
	return t.begin(ctx, "copy:"+strings.Join(data.TableName, "."))
}

func (t queryTracer) TraceCopyFromEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceCopyFromEndData) {
	t.end(ctx, data.Err)
}

var (
	_ pgx.QueryTracer    = queryTracer{}
	_ pgx.BatchTracer    = queryTracer{}
	_ pgx.CopyFromTracer = queryTracer{}
)
