package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/test/internal/jqbin"
)

// Seed 004: the producer exports one span per submitted batch, and the jobs of the batch carry its
// trace (the server's submit span is its child), so their later spans join the producer's trace.
func TestProducerBatchSpanLinksJobsE2E(t *testing.T) {
	t.Parallel()
	recv := &otlpReceiver{}
	collector := newOTLPCollector(t, recv)
	tracing := []string{"JQ_TRACING_ENABLED=true", "JQ_TRACING_PROTOCOL=http", "JQ_TRACING_ENDPOINT=" + collector}

	_, prefix := testenv.NewRedis(t)
	dsn := testenv.NewDatabase(t)
	se := jqbin.NewServerEnv(t, dsn)
	srv := jqbin.Start(t, append(append(se.Env, "JQ_REDIS_KEY_PREFIX="+prefix), tracing...), "--role=server")
	srv.WaitLog(t, "server started")

	dir := t.TempDir()
	for i := range 3 {
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.txt", i)), []byte("x"), 0o644))
	}
	env := append([]string{
		"JQ_PRODUCER_SCAN_DIR=" + dir, "JQ_PRODUCER_ONCE=true", "JQ_PRODUCER_SERVER_ADDR=" + se.Addr(),
		"JQ_REDIS_ADDR=" + testenv.RedisAddr(), "JQ_REDIS_KEY_PREFIX=" + prefix,
	}, tracing...)
	p := jqbin.Start(t, env, "--role=producer")
	require.Zero(t, p.WaitExit(t, 2*time.Minute), "producer output:\n%v", p.Output())

	// The jobs' stored trace ids.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT trace_context->>'traceparent' FROM jobs`)
	require.NoError(t, err)
	traces := map[string]int{}
	for rows.Next() {
		var tp string
		require.NoError(t, rows.Scan(&tp))
		f := strings.Split(tp, "-")
		require.Len(t, f, 4, "traceparent %q", tp)
		traces[f[1]]++
	}
	require.NoError(t, rows.Err())
	require.Len(t, traces, 1, "one batch, one trace: %v", traces)

	// The producer flushes its spans on exit; the server's batch processor within its delay.
	testenv.Eventually(t, 30*time.Second, func() error {
		recv.mu.Lock()
		defer recv.mu.Unlock()
		var batch, submit bool
		for _, s := range recv.spans {
			if traces[s.traceID] == 0 {
				continue
			}
			switch {
			case s.name == "jq.producer.batch" && s.service == "jq-producer":
				if s.attrs["jq.job_count"] != "3" || s.attrs["jq.producer.created"] != "3" {
					return fmt.Errorf("batch span attributes %v", s.attrs)
				}
				batch = true
			case s.name == "jq.jobs.submit" && s.service == "jq-server":
				submit = true
			}
		}
		if !batch || !submit {
			return fmt.Errorf("in the jobs' trace: producer batch span %v, server submit span %v", batch, submit)
		}
		return nil
	})
}
