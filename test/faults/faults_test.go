package faults

// Fault tests with the real binary: each test runs a private
// PostgreSQL and redis-server, server and worker processes with second-scale
// timeouts (faults_helpers_test.go), submits a known set of jobs, injects one
// fault, heals it, waits for every job to end DONE or DEAD_LETTERED, and has
// internal/faultcheck judge the jobs and their events: no job lost, every
// event path legal, no stale result accepted, and jobs run more than once only
// for a cause the fault explains. docs/reliability.md records the figures.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/internal/faultcheck"
	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/test/internal/jqbin"
)

// fastBackoff is the retry backoff of the queues the fault tests use, so a
// recovered job is retried within a reaper interval or two.
const (
	fastBackoffBase = 200 * time.Millisecond
	fastBackoffMax  = time.Second
)

// kill -9 of a worker in the middle of its jobs: the server notices the
// missing heartbeats, fails the worker's jobs (worker_lost) and they run again
// on the other worker, with no operator.
func TestFaultWorkerKill(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.startServer()
	ctx := r.ctx()
	r.createQueue(ctx, "work", 3, fastBackoffBase, fastBackoffMax)
	victim := r.startWorker(0, "kill-w1", 4, "work")
	other := r.startWorker(0, "kill-w2", 4, "work")
	victim.WaitLog(t, "assignment stream open")
	other.WaitLog(t, "assignment stream open")

	ids := r.submit(ctx, r.client(), r.faultJobs(40, "work", fault{Mode: "ok", MS: 1000}))
	testenv.Eventually(t, 20*time.Second, func() error {
		n, err := r.count(ctx, `SELECT count(*) FROM jobs WHERE worker_id = 'kill-w1' AND state IN ('ASSIGNED', 'RUNNING')`)
		if err == nil && n < 2 {
			err = fmt.Errorf("kill-w1 runs %d jobs", n)
		}
		return err
	})
	victim.Signal(t, syscall.SIGKILL)
	killed := time.Now()
	victim.WaitExit(t, 10*time.Second)
	held := r.heldBy(ctx, "kill-w1")
	require.NotEmpty(t, held)

	r.waitRerun(ctx, held, "kill-w1", faultSettle)
	recovery := time.Since(killed)
	settled := r.waitSettled(ctx, ids, faultSettle, nil)
	t.Logf("worker kill: %d jobs held by the killed worker re-ran on kill-w2 %v after the kill (bound %v); all %d jobs settled %v later",
		len(held), recovery.Round(10*time.Millisecond), faultRecoveryBound(), len(ids), settled.Round(10*time.Millisecond))
	// Plus the runtime of the re-run jobs themselves on the surviving worker's 4 slots (the killed
	// worker held up to its concurrency plus its prefetch), behind the one job per slot it had
	// prefetched: (held/4 + 1) seconds of 1 s jobs.
	runs := time.Duration(len(held)+3)/4*time.Second + time.Second
	require.Less(t, recovery, faultRecoveryBound()+runs, "recovery slower than heartbeat timeout + reaper interval + backoff + the re-runs + slack")

	rep := r.check(ctx, ids)
	require.Equal(t, len(ids), rep.Done)
	causes := duplicateCauses(t, rep, "worker_lost", "assignment_timeout")
	for id := range rep.Duplicates() {
		// held is read just after the kill; a claim for kill-w1 the server was still making
		// (its stream not yet seen broken) assigns jobs to it a moment later. Those are held
		// by kill-w1 as well: the reaper fails them as worker_lost.
		if _, ok := held[id]; !ok {
			require.True(t, lostBy(rep.Histories[id], "kill-w1"), "job %s ran twice but the killed worker did not hold it", id)
		}
	}
	t.Logf("worker kill: jobs=%d faults=1 lost=0 duplicates=%d (by cause %v)", len(ids), len(rep.Duplicates()), causes)
}

// faultRecoveryBound: a dead worker's jobs run again within the heartbeat
// timeout, a reaper interval and the first retry's backoff (with its jitter),
// plus slack for dispatch on a loaded test machine.
func faultRecoveryBound() time.Duration {
	return faultHeartbeatTimeout + faultReaperInterval + fastBackoffBase*11/10 + 3*time.Second
}

// kill -9 of one of two servers mid-dispatch: the other server finishes every
// job. A worker takes a single --server-addr, so each server has its own
// worker; the dead server's worker falls silent, and the surviving server's
// reaper recovers its jobs for the other worker. When the server comes back,
// its worker registers again.
func TestFaultServerKill(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.startServer()
	r.startServer()
	ctx := r.ctx()
	r.createQueue(ctx, "work", 3, fastBackoffBase, fastBackoffMax)
	w0 := r.startWorker(0, "srv-w0", 4, "work")
	w1 := r.startWorker(1, "srv-w1", 4, "work")
	w0.WaitLog(t, "assignment stream open")
	w1.WaitLog(t, "assignment stream open")

	survivor := r.servers[1].client
	ids := r.submit(ctx, survivor, r.faultJobs(300, "work", fault{Mode: "ok", MS: 50}))
	testenv.Eventually(t, 20*time.Second, func() error {
		n, err := r.count(ctx, `SELECT count(*) FROM jobs WHERE state = 'DONE' AND worker_id = 'srv-w0'`)
		if err == nil && n < 30 {
			err = fmt.Errorf("srv-w0 finished %d jobs", n)
		}
		return err
	})
	r.servers[0].proc.Signal(t, syscall.SIGKILL)
	r.servers[0].proc.WaitExit(t, 10*time.Second)
	held := r.heldBy(ctx, "srv-w0")

	settled := r.waitSettled(ctx, ids, faultSettle, nil)
	rep := r.check(ctx, ids)
	require.Equal(t, len(ids), rep.Done)
	causes := duplicateCauses(t, rep, "worker_lost", "assignment_timeout")
	for id := range rep.Duplicates() {
		// held is read just after the kill; a claim the dead server's backend was still
		// committing assigns its jobs to srv-w0 a moment later. Those are held by srv-w0 as
		// well: the reaper fails them as worker_lost.
		if _, ok := held[id]; !ok {
			require.True(t, lostBy(rep.Histories[id], "srv-w0"), "job %s ran twice but srv-w0 did not hold it when its server died", id)
		}
	}
	byW1, err := r.count(ctx, `SELECT count(*) FROM jobs WHERE worker_id = 'srv-w1' AND id = ANY($1::uuid[])`, ids)
	require.NoError(t, err)
	t.Logf("server kill: jobs=%d faults=1 lost=0 duplicates=%d (by cause %v); %d jobs held by the dead server's worker; "+
		"everything settled %v after the kill; srv-w1 finished %d",
		len(ids), len(rep.Duplicates()), causes, len(held), settled.Round(10*time.Millisecond), byW1)

	// Heal: the server comes back on its address and its worker rejoins.
	r.restartServer(0)
	testenv.Eventually(t, 30*time.Second, func() error {
		if n := w0.LogCount("worker registered"); n < 2 {
			return fmt.Errorf("srv-w0 registered %d times", n)
		}
		return nil
	})
	more := r.submit(ctx, r.servers[0].client, r.faultJobs(40, "work", fault{Mode: "ok", MS: 20}))
	r.waitSettled(ctx, more, faultSettle, nil)
	rep = r.check(ctx, more)
	require.Equal(t, len(more), rep.Done)
}

// A worker given both replicas (--server-addr s0,s1) outlives the one it talks to: kill -9 of
// server 0 and the worker registers with server 1 and goes on working; nothing is lost.
func TestFaultWorkerFailsOverToAnotherServer(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.startServer()
	r.startServer()
	ctx := r.ctx()
	r.createQueue(ctx, "work", 3, fastBackoffBase, fastBackoffMax)
	w := r.startWorkerAt(r.servers[0].se.Addr()+","+r.servers[1].se.Addr(), "fo-w", 4, "work")
	w.WaitLog(t, "assignment stream open")

	survivor := r.servers[1].client
	before := r.submit(ctx, survivor, r.faultJobs(100, "work", fault{Mode: "ok", MS: 10}))
	r.waitSettled(ctx, before, faultSettle, nil)
	r.servers[0].proc.Signal(t, syscall.SIGKILL)
	r.servers[0].proc.WaitExit(t, 10*time.Second)
	killed := time.Now()

	after := r.submit(ctx, survivor, r.faultJobs(100, "work", fault{Mode: "ok", MS: 10}))
	settled := r.waitSettled(ctx, after, faultSettle, nil)
	rep := r.check(ctx, append(before, after...))
	require.Equal(t, len(before)+len(after), rep.Done)
	byW, err := r.count(ctx, `SELECT count(*) FROM jobs WHERE worker_id = 'fo-w' AND state = 'DONE' AND id = ANY($1::uuid[])`, after)
	require.NoError(t, err)
	require.Equal(t, len(after), byW, "the only worker ran the jobs submitted after the kill: it failed over")
	require.GreaterOrEqual(t, w.LogCount("worker registered"), 2, "registered again, with server 1")
	t.Logf("failover: the %d jobs submitted after the kill were all done by the worker %v after the kill "+
		"(%v after their submit); lost=0, duplicates=%d",
		len(after), time.Since(killed).Round(10*time.Millisecond), settled.Round(10*time.Millisecond), len(rep.Duplicates()))
}

// SIGSTOP of a worker past the heartbeat timeout, then SIGCONT: meanwhile its
// jobs ran again elsewhere; the woken worker's outcome for the old attempt is
// refused (or dropped because the server told it its leases were gone), and
// each job has exactly one DONE, for the newer attempt.
func TestFaultWorkerStopCont(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.startServer()
	ctx := r.ctx()
	r.createQueue(ctx, "work", 3, fastBackoffBase, fastBackoffMax)
	frozen := r.startWorker(0, "stop-w1", 4, "work")
	frozen.WaitLog(t, "assignment stream open")
	ids := r.submit(ctx, r.client(), r.faultJobs(4, "work", fault{Mode: "ok", MS: 2000}))
	testenv.Eventually(t, 20*time.Second, func() error {
		m, err := faultcheck.ReadMarker(r.marker)
		if err == nil && m.Total() < len(ids) {
			err = fmt.Errorf("%d of %d handlers started", m.Total(), len(ids))
		}
		return err
	})
	frozen.Signal(t, syscall.SIGSTOP)
	stopped := time.Now()
	r.startWorker(0, "stop-w2", 4, "work")

	r.waitSettled(ctx, ids, faultSettle, nil)
	rerun := time.Since(stopped)
	for _, id := range ids {
		var worker string
		var attempt int
		require.NoError(t, r.db.QueryRowContext(ctx, `SELECT worker_id, attempt FROM jobs WHERE id = $1`, id).Scan(&worker, &attempt))
		require.Equal(t, "stop-w2", worker)
		require.Equal(t, 2, attempt)
	}

	frozen.Signal(t, syscall.SIGCONT)
	woke := time.Now()
	refused := map[string]string{}
	testenv.Eventually(t, 20*time.Second, func() error {
		for _, l := range frozen.Output() {
			for _, msg := range []string{"report rejected by the server; dropping it", "job outcome not reported"} {
				if m := logLine(l, msg); m != nil {
					refused[fmt.Sprint(m["job_id"])] = msg
				}
			}
		}
		for _, id := range ids {
			if _, ok := refused[id]; !ok {
				return fmt.Errorf("stop-w1 has not given up job %s", id)
			}
		}
		return nil
	})
	gaveUp := time.Since(woke)
	testenv.Eventually(t, 20*time.Second, func() error {
		if n := frozen.LogCount("worker registered"); n < 2 {
			return fmt.Errorf("stop-w1 registered %d times", n)
		}
		return nil
	})
	rep := r.check(ctx, ids)
	require.Equal(t, len(ids), rep.Done)
	for _, id := range ids {
		require.Equal(t, 2, rep.Executions[id])
		var dones []int
		for _, e := range rep.Histories[id].Events {
			if e.To == "DONE" {
				dones = append(dones, e.Attempt)
			}
		}
		require.Equal(t, []int{2}, dones, "job %s: one DONE, for the newer attempt", id)
	}
	causes := duplicateCauses(t, rep, "worker_lost", "assignment_timeout")
	rejected := 0
	for _, msg := range refused {
		if msg == "report rejected by the server; dropping it" {
			rejected++
		}
	}
	t.Logf("worker stop: jobs=%d faults=1 lost=0 duplicates=%d (by cause %v); re-run and done elsewhere %v after SIGSTOP; "+
		"the woken worker gave up every old attempt within %v (%d reports refused as stale, %d outcomes dropped)",
		len(ids), len(rep.Duplicates()), causes, rerun.Round(10*time.Millisecond), gaveUp.Round(10*time.Millisecond),
		rejected, len(refused)-rejected)
}

// FLUSHALL of Redis during a run, then a restart of redis-server during a
// run: Redis holds only dispatch ephemera, so nothing is lost, no job runs
// twice, and dispatch goes on (from Postgres while Redis is down).
func TestFaultRedisFlushAndRestart(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.startServer()
	ctx := r.ctx()
	r.createQueue(ctx, "work", 3, fastBackoffBase, fastBackoffMax)
	for _, id := range []string{"redis-w1", "redis-w2"} {
		r.startWorker(0, id, 4, "work").WaitLog(t, "assignment stream open")
	}
	doneAtLeast := func(ids []string, n int, within time.Duration) {
		t.Helper()
		testenv.Eventually(t, within, func() error {
			done, err := r.count(ctx, `SELECT count(*) FROM jobs WHERE id = ANY($1::uuid[]) AND state = 'DONE'`, ids)
			if err == nil && done < n {
				err = fmt.Errorf("%d of %d DONE", done, n)
			}
			return err
		})
	}

	first := r.submit(ctx, r.client(), r.faultJobs(300, "work", fault{Mode: "ok", MS: 30}))
	doneAtLeast(first, 50, 20*time.Second)
	reply, err := jqbin.RedisCommand(r.redis.Addr(), "FLUSHALL")
	require.NoError(t, err)
	require.Equal(t, "+OK", reply)
	flushed := time.Now()
	r.waitSettled(ctx, first, faultSettle, nil)
	afterFlush := time.Since(flushed)

	second := r.submit(ctx, r.client(), r.faultJobs(300, "work", fault{Mode: "ok", MS: 30}))
	doneAtLeast(second, 50, 20*time.Second)
	r.redis.Kill()
	down := time.Now()
	before, err := r.count(ctx, `SELECT count(*) FROM jobs WHERE id = ANY($1::uuid[]) AND state = 'DONE'`, second)
	require.NoError(t, err)
	// Dispatch goes on from Postgres while Redis is down.
	doneAtLeast(second, before+20, 20*time.Second)
	withoutRedis := time.Since(down)
	r.redis.Start()
	restarted := time.Now()
	r.waitSettled(ctx, second, faultSettle, nil)
	afterRestart := time.Since(restarted)

	all := append(slices.Clone(first), second...)
	rep := r.check(ctx, all)
	require.Equal(t, len(all), rep.Done)
	duplicateCauses(t, rep) // no cause explains a second run here
	require.Empty(t, rep.Duplicates())
	t.Logf("redis: jobs=%d faults=2 lost=0 duplicates=0; after FLUSHALL the first batch settled in %v; "+
		"20 jobs finished %v into the outage; after the restart the second batch settled in %v",
		len(all), afterFlush.Round(10*time.Millisecond), withoutRedis.Round(10*time.Millisecond), afterRestart.Round(10*time.Millisecond))
}

// submitOutcome is one SubmitJob call of the Postgres outage test.
type submitOutcome struct {
	key  string
	id   string
	code connect.Code // 0: OK
	at   time.Time
}

// Postgres stopped (killed: immediate, with crash recovery on restart) for
// several seconds while clients submit: submits during the outage fail with
// UNAVAILABLE, every acknowledged submit exists afterwards, and retrying a
// failed submit with its idempotency key yields exactly one job.
func TestFaultPostgresOutage(t *testing.T) {
	t.Parallel()
	const outage = 8 * time.Second
	// A worker whose calls fail for a while registers again with a backoff of
	// up to 5 s (executor.DefaultMaxBackoff) and heartbeats only once
	// registered; with the 3 s heartbeat timeout of the other tests the
	// reaper's grace after the outage can end before the worker is back, and
	// it re-runs that worker's jobs (worker_lost). The production defaults
	// (30 s) leave a wide margin; 6 s keeps one here.
	r := newRig(t, "JQ_SCHEDULER_WORKER_HEARTBEAT_TIMEOUT_S=6")
	r.startServer()
	ctx := r.ctx()
	r.createQueue(ctx, "work", 3, fastBackoffBase, fastBackoffMax)
	r.startWorker(0, "pg-w1", 4, "work").WaitLog(t, "assignment stream open")
	spec := r.faultJobs(1, "work", fault{Mode: "ok", MS: 20})[0]
	keyed := func(key string) *jqv1.JobSpec {
		s := proto.CloneOf(spec)
		s.IdempotencyKey = key
		return s
	}
	submitOnce := func(key string) submitOutcome {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := r.client().Jobs.SubmitJob(cctx, connect.NewRequest(&jqv1.SubmitJobRequest{Job: keyed(key)}))
		if err != nil {
			return submitOutcome{key: key, code: connect.CodeOf(err), at: time.Now()}
		}
		return submitOutcome{key: key, id: resp.Msg.GetJobId(), at: time.Now()}
	}

	var mu sync.Mutex
	var outcomes []submitOutcome
	loop, stopLoop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopLoop()
	wg.Go(func() {
		for n := 0; loop.Err() == nil; n++ {
			o := submitOnce(fmt.Sprintf("k-%d", n))
			mu.Lock()
			outcomes = append(outcomes, o)
			mu.Unlock()
			if o.code != 0 {
				time.Sleep(100 * time.Millisecond) // a client's retry pause, not synchronisation
			}
		}
	})
	tally := func(since time.Time) (ok, failed int) {
		mu.Lock()
		defer mu.Unlock()
		for _, o := range outcomes {
			switch {
			case o.at.Before(since):
			case o.code == 0:
				ok++
			default:
				failed++
			}
		}
		return ok, failed
	}
	testenv.Eventually(t, 20*time.Second, func() error {
		if ok, _ := tally(time.Time{}); ok < 20 {
			return fmt.Errorf("%d submits accepted", ok)
		}
		return nil
	})

	r.pg.Kill()
	down := time.Now()
	testenv.Eventually(t, outage+20*time.Second, func() error {
		if _, failed := tally(down); failed < 3 {
			return fmt.Errorf("%d submits failed during the outage", failed)
		}
		if d := time.Since(down); d < outage {
			return fmt.Errorf("outage %v of %v", d.Round(time.Second), outage)
		}
		return nil
	})
	r.pg.Start()
	up := time.Now()
	var firstOK time.Duration
	testenv.Eventually(t, 30*time.Second, func() error {
		ok, _ := tally(up)
		if ok > 0 && firstOK == 0 {
			firstOK = time.Since(up)
		}
		if ok < 20 {
			return fmt.Errorf("%d submits accepted since Postgres is back", ok)
		}
		return nil
	})
	stopLoop()
	wg.Wait()
	require.False(t, r.servers[0].proc.Exited(), "the server exited during the outage")

	// Every failure was UNAVAILABLE; retry each with its key until accepted.
	mu.Lock()
	final := slices.Clone(outcomes)
	mu.Unlock()
	codes := map[connect.Code]int{}
	idOf := map[string]string{}
	var failedKeys []string
	for _, o := range final {
		if o.code != 0 {
			codes[o.code]++
			failedKeys = append(failedKeys, o.key)
			continue
		}
		idOf[o.key] = o.id
	}
	require.Equal(t, map[connect.Code]int{connect.CodeUnavailable: len(failedKeys)}, codes, "submits during the outage must fail UNAVAILABLE")
	committedAnyway := 0
	for _, key := range failedKeys {
		var o submitOutcome
		testenv.Eventually(t, 10*time.Second, func() error {
			if o = submitOnce(key); o.code != 0 {
				return fmt.Errorf("retry of %s: %v", key, o.code)
			}
			return nil
		})
		idOf[key] = o.id
		if n, _ := r.count(ctx, `SELECT count(*) FROM event_rows e JOIN jobs j ON j.id = e.job_id
WHERE j.id = $1 AND e.seq = 1 AND e.created_at < $2`, o.id, up); n > 0 {
			committedAnyway++
		}
	}
	// A repeat of an accepted submit returns the same job.
	for key, id := range idOf {
		again := submitOnce(key)
		require.Zero(t, again.code)
		require.Equal(t, id, again.id, "key %s", key)
		break
	}
	var ids []string
	for key, id := range idOf {
		n, err := r.count(ctx, `SELECT count(*) FROM jobs WHERE idempotency_key = $1`, key)
		require.NoError(t, err)
		require.Equal(t, 1, n, "key %s: one job", key)
		ids = append(ids, id)
	}
	r.waitSettled(ctx, ids, faultSettle, nil)
	rep := r.check(ctx, ids)
	require.Equal(t, len(ids), rep.Done)
	require.Equal(t, len(final), rep.Jobs)
	// A job started under its assignment whose start could not be recorded during the outage is
	// failed by the assignment timeout and runs again (at least once).
	// The reaper waits a heartbeat timeout after an outage; an outage longer than the worker's fence
	// (3/4 of the heartbeat timeout: its heartbeats cannot be recorded) makes it stop its running
	// jobs, which run again (lease_expired).
	causes := duplicateCauses(t, rep, "assignment_timeout", "lease_expired")
	t.Logf("postgres outage: submits=%d accepted=%d unavailable=%d (of which committed before the failure: %d); "+
		"outage %v; first accepted submit %v after restart; jobs=%d lost=0 duplicates=%d (by cause %v)",
		len(final), len(final)-len(failedKeys), len(failedKeys), committedAnyway, outage, firstOK.Round(10*time.Millisecond),
		len(ids), len(rep.Duplicates()), causes)
}

// Poison jobs — a handler that panics, one that kills its worker process and
// one that hangs past its timeout ignoring cancellation — on a queue with
// max_retries 2: each is dead-lettered after its third attempt with the last
// error, while a batch of ordinary jobs all finish. Killed workers are
// restarted, as a supervisor would.
func TestFaultPoisonJobs(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.startServer()
	ctx := r.ctx()
	r.createQueue(ctx, "poison", 2, 100*time.Millisecond, 500*time.Millisecond)
	r.createQueue(ctx, "poison-exit", 2, 100*time.Millisecond, 500*time.Millisecond)
	r.createQueue(ctx, "poison-hang", 2, 100*time.Millisecond, 500*time.Millisecond)
	r.createQueue(ctx, "work", 3, fastBackoffBase, fastBackoffMax)
	// The jobs that kill their worker or hang have workers of their own, so
	// that the crashes do not fail other jobs' attempts (worker_lost) as
	// well, and a hung handler's slot does not meet the over-assignment of
	// TestFaultHungHandlerKeepsItsSlot.
	queuesOf := map[string]string{"poison-a": "poison,work", "poison-b": "poison,work", "crash": "poison-exit", "hang": "poison-hang"}
	for _, id := range []string{"poison-a", "poison-b", "crash", "hang"} {
		r.startWorker(0, id, 4, queuesOf[id]).WaitLog(t, "assignment stream open")
	}

	panicJob := r.submit(ctx, r.client(), r.faultJobs(1, "poison", fault{Mode: "panic"}))[0]
	exitJob := r.submit(ctx, r.client(), r.faultJobs(1, "poison-exit", fault{Mode: "exit", Code: 3}))[0]
	hangSpec := r.faultJobs(1, "poison-hang", fault{Mode: "hang", MS: 4000})
	hangSpec[0].Timeout = durationpb.New(time.Second)
	hangJob := r.submit(ctx, r.client(), hangSpec)[0]
	ok := r.submit(ctx, r.client(), r.faultJobs(200, "work", fault{Mode: "ok", MS: 20}))

	var exits []int
	restarts := 0
	supervise := func() {
		for id, p := range r.workers {
			if !p.Exited() {
				continue
			}
			delete(r.workers, id)
			exits = append(exits, p.Cmd.ProcessState.ExitCode())
			restarts++
			next := fmt.Sprintf("crash-r%d", restarts)
			queuesOf[next] = queuesOf[id]
			r.startWorker(0, next, 4, queuesOf[id])
		}
	}
	poison := []string{panicJob, exitJob, hangJob}
	settled := r.waitSettled(ctx, append(slices.Clone(poison), ok...), faultSettle, supervise)

	rep := r.check(ctx, poison)
	require.Equal(t, 3, rep.DeadLettered)
	lastFailure := map[string]string{}
	for name, id := range map[string]string{"panic": panicJob, "exit": exitJob, "hang": hangJob} {
		h := rep.Histories[id]
		require.Equal(t, "max_retries_exceeded", h.Events[len(h.Events)-1].Reason, name)
		require.Equal(t, 2, h.Job.RetryCount, name)
		require.Equal(t, 3, h.Job.Attempt, name)
		require.Equal(t, 3, rep.Executions[id], name)
		require.NotEmpty(t, h.Job.LastError, name)
		for _, e := range h.Events {
			if e.To == "FAILED" {
				lastFailure[name] = e.Reason
			}
		}
		// Out of retries after a plain error, the job says so; a specific cause stays.
		want := lastFailure[name]
		if want == "error" {
			want = "max_retries_exceeded"
		}
		require.Equal(t, want, h.Job.FailureReason, name)
		t.Logf("poison %s: dead-lettered after %d attempts; last failure %s: %q", name, h.Job.Attempt, h.Job.FailureReason, h.Job.LastError)
	}
	require.Equal(t, map[string]string{"panic": "error", "exit": "worker_lost", "hang": "timeout"}, lastFailure)
	require.Contains(t, rep.Histories[panicJob].Job.LastError, "panicked")
	require.Equal(t, []int{3, 3, 3}, exits, "each attempt of the exit job ended one worker with code 3")

	okRep := r.check(ctx, ok)
	require.Equal(t, len(ok), okRep.Done)
	duplicateCauses(t, okRep)
	require.Empty(t, okRep.Duplicates())
	t.Logf("poison: jobs=%d (3 poison) faults=3 poison jobs lost=0; ordinary duplicates=0; worker restarts=%d; settled in %v",
		len(ok)+3, restarts, settled.Round(10*time.Millisecond))
}

// Retry timing: a job that always fails, on a queue with backoff base 100 ms
// and max 1 s. The gap between each retry (FAILED→PENDING) and the next
// assignment follows min(base·2^n, max) plus at most 10 % jitter, plus
// scheduling slack. Not parallel: it measures time.
func TestFaultRetryTiming(t *testing.T) {
	const (
		base     = 100 * time.Millisecond
		maxDelay = time.Second
		slack    = 300 * time.Millisecond
	)
	r := newRig(t)
	r.startServer()
	ctx := r.ctx()
	r.createQueue(ctx, "backoff", 4, base, maxDelay)
	r.startWorker(0, "timing-w1", 2, "backoff").WaitLog(t, "assignment stream open")
	specs := r.faultJobs(2, "backoff", fault{Mode: "fail"})
	five := int32(5)
	specs[1].MaxRetries = &five // one more retry, to reach the cap
	ids := r.submit(ctx, r.client(), specs)
	r.waitSettled(ctx, ids, faultSettle, nil)
	rep := r.check(ctx, ids)
	require.Equal(t, 2, rep.DeadLettered)

	for i, id := range ids {
		retries := 4 + i
		h := rep.Histories[id]
		require.Equal(t, "max_retries_exceeded", h.Events[len(h.Events)-1].Reason)
		require.Equal(t, "max_retries_exceeded", h.Job.FailureReason, "out of retries after plain errors: peek --dead names why")
		require.Equal(t, retries+1, rep.Executions[id])
		var gaps []time.Duration
		for k, e := range h.Events {
			if e.From != "FAILED" || e.To != "PENDING" {
				continue
			}
			require.Less(t, k+1, len(h.Events))
			next := h.Events[k+1]
			require.Equal(t, "ASSIGNED", string(next.To))
			gaps = append(gaps, next.At.Sub(e.At))
		}
		require.Len(t, gaps, retries)
		for n, gap := range gaps {
			want := min(base<<n, maxDelay)
			t.Logf("retry timing: job %d retry %d: backoff %v, measured gap %v", i, n, want, gap.Round(time.Millisecond))
			require.GreaterOrEqual(t, gap, want-5*time.Millisecond, "retry %d came before its backoff", n)
			require.LessOrEqual(t, gap, want*11/10+slack, "retry %d came too late", n)
		}
	}
}

// SIGTERM to the server and the worker during load: the server exits 0
// within 30 s and the worker within its grace period; jobs the worker had to
// abandon when its grace ran out stay RUNNING until the reaper of the
// restarted server recovers them. Nothing is lost.
func TestFaultSIGTERMDuringLoad(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.startServer()
	ctx := r.ctx()
	r.createQueue(ctx, "work", 3, fastBackoffBase, fastBackoffMax)
	w := r.startWorker(0, "term-w1", 4, "work")
	w.WaitLog(t, "assignment stream open")
	ids := r.submit(ctx, r.client(), r.faultJobs(100, "work", fault{Mode: "ok", MS: 30}))
	long := r.submit(ctx, r.client(), r.faultJobs(8, "work", fault{Mode: "ok", MS: 4000}))
	ids = append(ids, long...)
	testenv.Eventually(t, 30*time.Second, func() error {
		n, err := r.count(ctx, `SELECT count(*) FROM jobs WHERE id = ANY($1::uuid[]) AND state = 'RUNNING'`, long)
		if err == nil && n < 4 {
			err = fmt.Errorf("%d long jobs running", n)
		}
		return err
	})

	srv := r.servers[0].proc
	srvExit, wExit := exitTime(srv), exitTime(w)
	term := time.Now()
	srv.Signal(t, syscall.SIGTERM)
	w.Signal(t, syscall.SIGTERM)
	tookSrv := waitExitTime(t, srvExit, term, 30*time.Second)
	tookW := waitExitTime(t, wExit, term, faultWorkerGrace+10*time.Second)
	codeSrv, codeW := srv.Cmd.ProcessState.ExitCode(), w.Cmd.ProcessState.ExitCode()
	left, err := r.count(ctx, `SELECT count(*) FROM jobs WHERE id = ANY($1::uuid[]) AND state IN ('ASSIGNED', 'RUNNING')`, ids)
	require.NoError(t, err)
	t.Logf("sigterm: server exited %d after %v, worker exited %d after %v (grace %v); %d jobs left ASSIGNED/RUNNING",
		codeSrv, tookSrv.Round(10*time.Millisecond), codeW, tookW.Round(10*time.Millisecond), faultWorkerGrace, left)
	require.Zero(t, codeSrv)
	require.Zero(t, codeW)
	require.Less(t, tookW, faultWorkerGrace+5*time.Second, "the worker overran its grace period")

	r.restartServer(0)
	restarted := time.Now()
	r.startWorker(0, "term-w2", 4, "work")
	r.waitSettled(ctx, ids, faultSettle, nil)
	rep := r.check(ctx, ids)
	require.Equal(t, len(ids), rep.Done)
	causes := duplicateCauses(t, rep, "worker_lost", "assignment_timeout")
	t.Logf("sigterm: jobs=%d faults=1 lost=0 duplicates=%d (by cause %v); all settled %v after the restart",
		len(ids), len(rep.Duplicates()), causes, time.Since(restarted).Round(10*time.Millisecond))
}

// A handler that hangs past its timeout keeps its worker's slot until it
// returns, even though the reaper has failed its attempt (reason timeout):
// the server must not count the slot free and send the worker a job it has no
// room for. Each ordinary job runs once and ends DONE, delayed at most until
// the hung handler returns.
func TestFaultHungHandlerKeepsItsSlot(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.startServer()
	ctx := r.ctx()
	r.createQueue(ctx, "work", 3, fastBackoffBase, fastBackoffMax)
	r.startWorker(0, "slot-w1", 1, "work").WaitLog(t, "assignment stream open")
	hang := r.faultJobs(1, "work", fault{Mode: "hang", MS: 4000})
	hang[0].Timeout = durationpb.New(time.Second)
	hang[0].MaxRetries = new(int32)
	hangJob := r.submit(ctx, r.client(), hang)[0]
	ok := r.submit(ctx, r.client(), r.faultJobs(5, "work", fault{Mode: "ok", MS: 20}))
	r.waitSettled(ctx, append([]string{hangJob}, ok...), faultSettle, nil)

	rep := r.check(ctx, []string{hangJob})
	require.Equal(t, 1, rep.DeadLettered)
	require.Equal(t, "timeout", rep.Histories[hangJob].Job.FailureReason)
	rep = r.check(ctx, ok)
	var failures []string
	for _, id := range ok {
		for _, e := range rep.Histories[id].Events {
			if e.To == "FAILED" {
				failures = append(failures, e.Error)
			}
		}
	}
	require.Empty(t, failures, "ordinary jobs failed because of the hung handler's slot")
	require.Equal(t, len(ok), rep.Done)
	require.Empty(t, rep.Duplicates())
}
