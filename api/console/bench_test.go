package console_test

import (
	"context"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
)

// BenchmarkPages times each console page, rendered end to end (the browser's request, the
// console, the API in-process, Postgres), over a table of JQ_CONSOLE_BENCH_JOBS jobs (default
// 10 000; docs/performance.md records 1 000 000) made with SQL: three queues, 94 % DONE, 3 %
// DEAD_LETTERED, 2 % PENDING (half of them delayed), 1 % FAILED, a "tenant" label of 100 values.
//
//	JQ_CONSOLE_BENCH_JOBS=1000000 go test ./api/console -run '^$' -bench Pages -benchtime 20x
func BenchmarkPages(b *testing.B) {
	n := 10000
	if s := os.Getenv("JQ_CONSOLE_BENCH_JOBS"); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		require.NoError(b, err)
	}
	e := start(b)
	for _, q := range []string{"bulk", "mail"} {
		e.createQueue(b, q)
	}
	c, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(c, e.serverDB)
	require.NoError(b, err)
	defer func() { _ = conn.Close(c) }()
	began := time.Now()
	_, err = conn.Exec(c, `
INSERT INTO jobs (id, queue, type, payload, priority, state, max_retries, spec_hash, labels, created_at, updated_at,
                  not_before, started_at, completed_at, worker_id, attempt, failure_reason, last_error)
SELECT gen_random_uuid(), (ARRAY['bulk','mail','default'])[1 + i % 3], 'email.send',
       convert_to('{"to":"user' || i || '@example.com"}', 'UTF8'), i % 10, st, 3, '\x00'::bytea,
       jsonb_build_object('tenant', 't' || (i % 100)), ts, ts,
       CASE WHEN st = 'PENDING' AND i % 2 = 0 THEN now() + interval '1 hour' ELSE ts END,
       CASE WHEN st IN ('DONE', 'FAILED', 'DEAD_LETTERED') THEN ts END,
       CASE WHEN st IN ('DONE', 'DEAD_LETTERED') THEN ts + interval '20 ms' END,
       CASE WHEN st = 'PENDING' THEN '' ELSE 'w-' || (i % 8) END,
       CASE WHEN st = 'PENDING' THEN 0 ELSE 1 END,
       CASE WHEN st IN ('FAILED', 'DEAD_LETTERED') THEN 'error' ELSE '' END,
       CASE WHEN st IN ('FAILED', 'DEAD_LETTERED') THEN 'smtp: 550 mailbox unavailable' ELSE '' END
FROM (SELECT i, now() - make_interval(secs => ($1::int - i) / 100.0) AS ts,
             CASE WHEN i % 100 < 94 THEN 'DONE' WHEN i % 100 < 97 THEN 'DEAD_LETTERED'
                  WHEN i % 100 < 99 THEN 'PENDING' ELSE 'FAILED' END AS st
      FROM generate_series(1, $1::int) AS i) g`, n)
	require.NoError(b, err)
	_, err = conn.Exec(c, "ANALYZE jobs")
	require.NoError(b, err)
	b.Logf("%d jobs inserted and analyzed in %s", n, time.Since(began).Round(time.Millisecond))

	// One job made through the API, with its events, for the job page; and a second page's token.
	id := e.submit(b, &jqv1.JobSpec{Queue: "mail", Type: "email.send", Payload: []byte(`{"to":"a@example.com"}`)})
	br := e.signedIn(b, "admin")
	_, body := br.get("/jobs?queue=bulk", nil)
	m := regexp.MustCompile(`href="\?([^"]*page=[^"]*)" rel="next"`).FindStringSubmatch(body)
	require.NotNil(b, m, "the first page links the next:\n%s", body)
	next := htmlUnescape(m[1])

	for _, p := range []struct{ name, path string }{
		{"overview", "/"},
		{"queue", "/queues/bulk"},
		{"jobs", "/jobs"},
		{"jobs_queue", "/jobs?queue=bulk"},
		{"jobs_queue_page2", "/jobs?" + next},
		{"jobs_state_pending", "/jobs?state=PENDING"},
		{"jobs_queue_state_failed", "/jobs?queue=mail&state=FAILED"},
		{"jobs_label", "/jobs?label=tenant%3Dt7"},
		{"dead", "/dead"},
		{"dead_queue", "/dead?queue=mail"},
		{"job", "/jobs/" + id},
		{"workers", "/workers"},
	} {
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				resp, _ := br.get(p.path, nil)
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("%s: %d", p.path, resp.StatusCode)
				}
			}
		})
	}
}

func htmlUnescape(s string) string {
	return regexp.MustCompile(`&amp;`).ReplaceAllString(s, "&")
}
