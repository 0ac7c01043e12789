package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/test/internal/jqbin"
)

// `events tail` with Kafka off follows the events through the API (the Postgres source), prints
// one JSON object per event, and ends with exit 0 on Ctrl-C.
func TestAdminEventsTailPostgresE2E(t *testing.T) {
	t.Parallel()
	c, a := newAdminE2E(t)
	a.ok("queue", "create", "tail")
	c.startFastWorker("w-tail", "tail")

	// Due in 2 s: it is assigned, run and completed while the tail runs, whenever its first poll is.
	id := a.submit("--queue", "tail", "--delay", "2s", "--payload", "{}")
	byQueue := jqbin.Start(t, nil, "--role=admin", "--server-addr", a.addr, "events", "tail", "--queue", "tail", "-o", "json", "--interval", "100ms")
	byJob := jqbin.Start(t, nil, "--role=admin", "--server-addr", a.addr, "events", "tail", "--job", id, "-o", "json", "--interval", "100ms")

	moves := func(p *jqbin.Process) []string {
		var out []string
		for _, l := range p.Output() {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(l), &m), l)
			requireFields(t, m, eventFields)
			require.Equal(t, id, m["job_id"])
			out = append(out, fmt.Sprintf("%v→%v", strings.TrimPrefix(m["from_state"].(string), "JOB_STATE_"),
				strings.TrimPrefix(m["to_state"].(string), "JOB_STATE_")))
		}
		return out
	}
	done := []string{"PENDING→ASSIGNED", "ASSIGNED→RUNNING", "RUNNING→DONE"}
	for _, p := range []*jqbin.Process{byQueue, byJob} {
		testenv.Eventually(t, 30*time.Second, func() error {
			if got := moves(p); !slices.Contains(got, "RUNNING→DONE") {
				return fmt.Errorf("events so far: %v", got)
			}
			return nil
		})
	}
	require.Equal(t, append([]string{"UNSPECIFIED→PENDING"}, done...), moves(byJob), "--job: the history, then what follows")
	got := moves(byQueue)
	require.Equal(t, done, got[len(got)-3:], "--queue: every transition after the first poll, in order")

	// --job ends by itself after the job's last event; --queue follows until Ctrl-C.
	select {
	case <-byJob.Done:
		require.NoError(t, byJob.Err, "the followed job ended: exit 0")
	case <-time.After(10 * time.Second):
		t.Fatal("events tail --job did not end after the job's last event")
	}
	require.NoError(t, byQueue.Cmd.Process.Signal(os.Interrupt))
	select {
	case <-byQueue.Done:
		require.NoError(t, byQueue.Err, "Ctrl-C is exit 0")
	case <-time.After(10 * time.Second):
		t.Fatal("events tail did not stop on Ctrl-C")
	}
	a.fails(3, "not found", "events", "tail", "--job", "00000000-0000-4000-8000-000000000000")
}

// `events tail --queue` streams: the server's WatchEvents sends each event as its engine records
// it. With a poll interval of an hour the tail still shows a job's whole life at once, and the
// server served it with the stream and the event feed — never the job listing polling used.
func TestAdminEventsTailStreamsE2E(t *testing.T) {
	t.Parallel()
	c, a := newAdminE2E(t)
	a.ok("queue", "create", "stream")
	c.startFastWorker("w-stream", "stream")

	cmd := exec.Command(jqbin.Path(t), "--role=admin", "--server-addr", a.addr, "events", "tail", "--queue", "stream",
		"--interval", "1h") // the table: -o json says nothing on stderr
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	testenv.Eventually(t, 30*time.Second, func() error {
		if !strings.Contains(stderr.String(), "following the events of queue stream") {
			return fmt.Errorf("the stream is not open yet: %q", stderr.String())
		}
		return nil
	})
	id := a.submit("--queue", "stream", "--payload", "{}")
	want := []string{"-→PENDING", "PENDING→ASSIGNED", "ASSIGNED→RUNNING", "RUNNING→DONE"}
	testenv.Eventually(t, 30*time.Second, func() error {
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		if len(lines) < 2 {
			return errors.New("nothing printed yet")
		}
		var got []string
		for _, l := range lines[1:] { // after the header: time, job, queue, from→to, …
			f := strings.Fields(l)
			require.GreaterOrEqual(t, len(f), 4, l)
			require.Equal(t, id, f[1], l)
			got = append(got, f[3])
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("events so far: %v", got)
		}
		return nil
	})
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	select {
	case err := <-done:
		require.NoError(t, err, "Ctrl-C is exit 0")
	case <-time.After(10 * time.Second):
		t.Fatal("events tail did not stop on Ctrl-C")
	}

	// The server's own account: the stream (counted when it ends) and the feed's statement, no
	// listing.
	testenv.Eventually(t, 10*time.Second, func() error {
		m := jqbin.ScrapeValues(t, c.servers[0].MetricsPort)
		var watched, listed, fed bool
		for k := range m {
			watched = watched || strings.HasPrefix(k, `jq_grpc_request_duration_seconds_count{method="/jq.v1.JobService/WatchEvents"`)
			listed = listed || strings.HasPrefix(k, `jq_grpc_request_duration_seconds_count{method="/jq.v1.JobService/ListJobs"`)
			fed = fed || strings.HasPrefix(k, `jq_db_query_duration_seconds_count{query_name="events_feed_read"`)
		}
		require.False(t, listed, "events tail --queue listed jobs: it polled")
		if !watched || !fed {
			return fmt.Errorf("WatchEvents counted %v, events_feed_read counted %v", watched, fed)
		}
		return nil
	})
	a.fails(3, "not found", "events", "tail", "--queue", "nosuchqueue")
}
