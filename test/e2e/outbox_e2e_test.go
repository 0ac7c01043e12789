package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/rpcclient"
	"github.com/jq-dev/jq/internal/kafkatest"
	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/test/internal/jqbin"
)

// kcatPath finds Debian's kcat, installing it when missing (as scripts/services.sh installs its
// servers); the test is skipped when that is impossible.
func kcatPath(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("kcat"); err == nil {
		return p
	}
	if out, err := exec.Command("apt-get", "install", "-y", "--no-install-recommends", "kcat").CombinedOutput(); err != nil {
		t.Skipf("kcat is not installed and apt-get could not install it: %v: %s", err, lastLines(string(out), 3))
	}
	p, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed and apt-get did not provide it")
	}
	return p
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// The real server relays every job event to Kafka (kfake over TCP) and an independent client,
// kcat, reads them back: one message per transition (event_rows), keyed by the job id, each job in one
// partition.
func TestOutboxEndToEndWithKcat(t *testing.T) {
	t.Parallel()
	kcat := kcatPath(t)
	// No topics: the server creates them, with kafka.retention_h.
	k, err := kfake.NewCluster(kfake.NumBrokers(1))
	require.NoError(t, err)
	t.Cleanup(k.Close)
	broker := k.ListenAddrs()[0]

	c := newCluster(t)
	c.startServer("JQ_KAFKA_ENABLED=true", "JQ_KAFKA_BROKERS="+broker, "JQ_KAFKA_RETENTION_H=24")
	line := c.procs[0].WaitLog(t, "kafka topics created")
	require.ElementsMatch(t, []any{"jq.job-events", "job.dead-lettered"}, line["topics"])
	c.startWorker(0, "w-kcat", 4, "default")
	ctx := c.ctx()
	var ids []string
	for range 20 {
		ids = append(ids, c.submit(ctx, &jqv1.JobSpec{Queue: "default", Type: "noop"}))
	}
	for _, id := range ids {
		c.waitState(ctx, id, jqv1.JobState_JOB_STATE_DONE)
	}

	db, err := sql.Open("pgx", c.dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	testenv.Eventually(t, 30*time.Second, func() error {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM event_rows WHERE id > (SELECT id FROM outbox_cursors WHERE name = 'kafka.batches')`).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("%d events unpublished", n)
		}
		return nil
	})
	want := map[string]int{}
	rows, err := db.QueryContext(ctx, `SELECT job_id::text, count(*) FROM event_rows GROUP BY job_id`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var (
			id string
			n  int
		)
		require.NoError(t, rows.Scan(&id, &n))
		want[id] = n
	}
	require.NoError(t, rows.Err())
	require.Len(t, want, len(ids))

	kctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(kctx, kcat, "-C", "-b", broker, "-t", "jq.job-events",
		"-o", "beginning", "-e", "-q", "-f", `%k %p\n`).CombinedOutput()
	require.NoError(t, err, "kcat: %s", out)
	got := map[string]int{}
	partition := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		key, p, ok := strings.Cut(line, " ")
		require.True(t, ok, "kcat line %q", line)
		got[key]++
		if prev, seen := partition[key]; seen {
			require.Equal(t, prev, p, "job %s spans partitions", key)
		}
		partition[key] = p
	}
	require.Equal(t, want, got, "one message per transition, keyed by job id")
}

// With kafka.enabled false the server says once, at start, that events stay in the store (Postgres).
func TestOutboxDisabledSaysSo(t *testing.T) {
	t.Parallel()
	_, prefix := testenv.NewRedis(t)
	se := jqbin.NewServerEnv(t, testenv.NewDatabase(t))
	p := jqbin.Start(t, append(se.Env, "JQ_REDIS_KEY_PREFIX="+prefix), "--role=server")
	p.WaitLog(t, "server started")
	line := p.WaitLog(t, "kafka disabled: job events stay in the store and are not relayed")
	require.Equal(t, "kafka.enabled", line["setting"])
	require.Equal(t, "postgres", line["store"])
	require.Zero(t, p.LogCount("outbox relay started"))
}

// kill -9 of the server while its relay is publishing a stream of events (a worker is running
// 6,000 jobs): after the restart every transition reaches Kafka at least once, each job's
// events first appear in seq order, and an event published twice is the same bytes (same seq).
// Events the dead relay had leased wait for the lease (kafka.relay_lease_s, 3 s here) before they
// are published again.
func TestOutboxServerKilledMidRelay(t *testing.T) {
	t.Parallel()
	const partitions = 3
	k, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "jq.job-events", "job.dead-lettered"))
	require.NoError(t, err)
	t.Cleanup(k.Close)
	brokers := k.ListenAddrs()

	c := newCluster(t)
	se := jqbin.NewServerEnv(t, c.dsn)
	se.Env = append(se.Env, "JQ_REDIS_KEY_PREFIX="+c.prefix, "JQ_SCHEDULER_INTERVAL_MS=100",
		"JQ_KAFKA_ENABLED=true", "JQ_KAFKA_BROKERS="+brokers[0], "JQ_KAFKA_RELAY_LEASE_S=3",
		// Second-scale recovery of the attempts the kill interrupted (as in the fault tests).
		"JQ_SCHEDULER_ASSIGNMENT_TIMEOUT_S=3", "JQ_SCHEDULER_WORKER_HEARTBEAT_TIMEOUT_S=3",
		"JQ_SCHEDULER_REAPER_INTERVAL_MS=200", "JQ_WORKER_HEARTBEAT_INTERVAL_S=1")
	srv := jqbin.Start(t, se.Env, "--role=server")
	srv.WaitLog(t, "server started")
	c.servers = append(c.servers, se)
	cl, err := rpcclient.New(rpcclient.Options{Addr: se.Addr()})
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	c.client = cl
	ctx := c.ctx()
	db, err := sql.Open("pgx", c.dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	count := func(query string) int {
		var n int
		require.NoError(t, db.QueryRowContext(ctx, query).Scan(&n))
		return n
	}

	const jobs = 6000
	for range jobs / 1000 {
		specs := make([]*jqv1.JobSpec, 1000)
		for i := range specs {
			specs[i] = &jqv1.JobSpec{Queue: "default", Type: "noop"}
		}
		_, err := cl.Jobs.SubmitJobs(ctx, connect.NewRequest(&jqv1.SubmitJobsRequest{Jobs: specs}))
		require.NoError(t, err)
	}
	c.startWorker(0, "w-relay", 16, "default")
	// Kill once the relay is well into the stream and jobs are still running.
	testenv.Eventually(t, 60*time.Second, func() error {
		if n := count(`SELECT count(*) FROM event_rows WHERE id <= (SELECT id FROM outbox_cursors WHERE name = 'kafka.batches')`); n < jobs {
			return fmt.Errorf("%d events published", n)
		}
		return nil
	})
	srv.Signal(t, syscall.SIGKILL)
	srv.WaitExit(t, 10*time.Second)
	leased := count(`SELECT CASE WHEN leased_until > now() THEN 1 ELSE 0 END FROM outbox_cursors WHERE name = 'kafka.batches'`)
	unpublished := count(`SELECT count(*) FROM event_rows WHERE id > (SELECT id FROM outbox_cursors WHERE name = 'kafka.batches')`)
	notDone := count(`SELECT count(*) FROM jobs WHERE state <> 'DONE'`)
	t.Logf("killed with %d events unpublished (the dead relay's lease live: %d), %d jobs not done",
		unpublished, leased, notDone)
	require.Positive(t, notDone, "the kill came after the run; nothing was in flight")

	restarted := time.Now()
	srv = jqbin.Start(t, se.Env, "--role=server")
	srv.WaitLog(t, "server started")
	testenv.Eventually(t, 90*time.Second, func() error {
		if n := count(`SELECT count(*) FROM jobs WHERE state <> 'DONE'`); n > 0 {
			return fmt.Errorf("%d jobs not done", n)
		}
		if n := count(`SELECT count(*) FROM event_rows WHERE id > (SELECT id FROM outbox_cursors WHERE name = 'kafka.batches')`); n > 0 {
			return fmt.Errorf("%d events unpublished", n)
		}
		return nil
	})
	rows := kafkatest.Rows(ctx, t, db)
	dups := kafkatest.RequireAtLeastOnce(t, rows, kafkatest.Consume(t, brokers, "jq.job-events", partitions), false)
	t.Logf("after the restart everything was done and published in %s: %d events, %d published twice",
		time.Since(restarted).Round(time.Millisecond), len(rows), dups)
}
