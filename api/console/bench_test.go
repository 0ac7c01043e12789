package console_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
)

// BenchmarkPages times each console page, rendered end to end (the browser's request, the
// console, the API in-process, Postgres), over a history of JQ_CONSOLE_BENCH_JOBS jobs (default
// 10 000; docs/performance.md records 1 000 000) and their events, made with SQL
// (testdata/bench_jobs.sql): three queues, 86 % DONE, 10 % PENDING (half of them delayed), 3 %
// DEAD_LETTERED, 1 % FAILED, three types, a "tenant" label of 100 values.
//
//	JQ_CONSOLE_BENCH_JOBS=1000000 go test ./api/console -run '^$' -bench Pages -benchtime 20x
func BenchmarkPages(b *testing.B) {
	n := 10000
	if s := os.Getenv("JQ_CONSOLE_BENCH_JOBS"); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		require.NoError(b, err)
	}
	fixture, err := os.ReadFile("testdata/bench_jobs.sql")
	require.NoError(b, err)
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
	// The fixture's statements in one transaction (the server's retry sweep must not see the jobs
	// before their events); the jobs' takes the job count as $1.
	err = pgx.BeginFunc(c, conn, func(tx pgx.Tx) error {
		for stmt := range strings.SplitSeq(string(fixture), ";\n") {
			var args []any
			if strings.Contains(stmt, "$1") {
				args = append(args, n)
			}
			if strings.Contains(stmt, "INSERT") {
				if _, err := tx.Exec(c, stmt, args...); err != nil {
					return err
				}
			}
		}
		return nil
	})
	require.NoError(b, err)
	_, err = conn.Exec(c, "VACUUM ANALYZE jobs, job_events, event_batches")
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
		{"jobs_label_none", "/jobs?label=tenant%3Dnone"},
		{"jobs_type", "/jobs?type=report.build"},
		{"jobs_created_between", "/jobs?created_from=" + url.QueryEscape(time.Now().UTC().Add(-time.Hour).Format("2006-01-02T15:04")) +
			"&created_to=" + url.QueryEscape(time.Now().UTC().Add(-30*time.Minute).Format("2006-01-02T15:04"))},
		{"jobs_completed_after", "/jobs?completed_from=" + url.QueryEscape(time.Now().UTC().Add(-10*time.Minute).Format("2006-01-02T15:04"))},
		{"scheduled", "/scheduled"},
		{"scheduled_queue", "/scheduled?queue=mail"},
		{"dead", "/dead"},
		{"dead_queue", "/dead?queue=mail"},
		{"job", "/jobs/" + id},
		{"workers", "/workers"},
	} {
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				resp, body := br.get(p.path, nil)
				// A filter without an index may meet its scan bound: the page says to narrow it.
				bounded := resp.StatusCode == http.StatusTooManyRequests && strings.Contains(body, "narrow the listing")
				if resp.StatusCode != http.StatusOK && !bounded {
					b.Fatalf("%s: %d\n%s", p.path, resp.StatusCode, body)
				}
			}
		})
	}
}

func htmlUnescape(s string) string {
	return regexp.MustCompile(`&amp;`).ReplaceAllString(s, "&")
}
