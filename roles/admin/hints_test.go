package admin

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/api/apierr"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/client"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/schedule"
)

// stuckClock is a clock whose first reading is now and every later one noWorkerAfter ahead of the
// wall clock: a wait that has just started sees its job PENDING for long enough to explain.
func stuckClock() func() time.Time {
	var calls atomic.Int32
	base := time.Now()
	return func() time.Time {
		if calls.Add(1) == 1 {
			return base
		}
		return time.Now().Add(noWorkerAfter + time.Second)
	}
}

func pendingJob(queueName, waiting string) *jqv1.Job {
	return &jqv1.Job{Id: jobID, Queue: queueName, Type: "noop", State: jqv1.JobState_JOB_STATE_PENDING, Waiting: waiting}
}

// A wait off a terminal (a script, CI) on a job nobody takes says once, on stderr, why it waits —
// the server's reason — and keeps waiting.
func TestWaitOffTerminalSaysWhyTheJobWaits(t *testing.T) {
	t.Parallel()
	for _, reason := range []string{"no connected worker serves queue other", "no connected worker handles type nosuchtype"} {
		t.Run(reason, func(t *testing.T) {
			t.Parallel()
			waitOffTerminal(t, reason)
		})
	}
}

func waitOffTerminal(t *testing.T, reason string) {
	re, _ := serve(t, &fakeAPI{job: pendingJob("other", reason)}, "table")
	re.now = stuckClock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	re.ctx = ctx
	stderr := re.Stderr.(*syncBuffer)
	done := make(chan error, 1)
	go func() { done <- (&JobWaitCmd{ID: jobID}).Run(re) }()
	want := "jq: job " + jobID + " is still PENDING after 5s: waiting: " + reason +
		" (jq worker list shows the workers, their queues and types); waiting on (Ctrl-C stops, --wait-timeout bounds the wait)\n"
	deadline := time.Now().Add(30 * time.Second)
	for stderr.String() != want && time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("the wait ended: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	require.Equal(t, want, stderr.String())
	cancel()
	require.Error(t, <-done)
	require.Equal(t, 1, strings.Count(stderr.String(), "still PENDING"), "said once")
}

// --wait-timeout on a job nobody takes ends with the server's reason.
func TestWaitTimeoutSaysWhyTheJobWaits(t *testing.T) {
	t.Parallel()
	re, _ := serve(t, &fakeAPI{job: pendingJob("default", "no connected worker handles type nosuchtype")}, "table")
	re.now = stuckClock()
	err := (&JobWaitCmd{ID: jobID, WaitTimeout: 500 * time.Millisecond}).Run(re)
	require.Error(t, err)
	require.Equal(t, "job "+jobID+" has not ended after 500ms (--wait-timeout); waiting: no connected worker handles type nosuchtype "+
		"(jq worker list shows the workers, their queues and types)", err.Error())
	require.False(t, errors.Is(err, context.Canceled))
}

// A refused cron spec is said once, without the schedule's name again or the error class, with
// examples of valid specs; the exit code stays "usage".
func TestScheduleCreateRefusalSaysWhatAValidSpecIs(t *testing.T) {
	t.Parallel()
	_, perr := schedule.Parse("bad", "")
	require.Error(t, perr)
	// What the engine returns and the API maps to INVALID_ARGUMENT (queue/engine/schedules.go).
	server := client.CallError("", apierr.New(queue.ErrInvalidArgument, perr.Error()))
	err := failed(scheduleRefusal(server), "cannot create schedule %q", "x")
	require.Equal(t, exitUsage, exitCode(err))
	line := errorLine(err, &Globals{ServerAddr: "h:1"})
	require.Equal(t, `cannot create schedule "x": cron spec "bad": expected 5 to 6 fields, found 1: [bad]`+cronExamples, line)
	require.Equal(t, 1, strings.Count(line, `"x"`), "the name once")
	require.NotContains(t, line, "invalid argument")
}

// With Kafka off, status says where the events stay: the store the server runs on.
func TestStatusSaysWhereEventsStay(t *testing.T) {
	t.Parallel()
	re := &runEnv{now: time.Now, globals: &Globals{ServerAddr: "h:1"}}
	for store, want := range map[string]string{"sqlite": "events stay in the embedded store", "postgres": "events stay in Postgres"} {
		var out strings.Builder
		require.NoError(t, re.statusTable(&out, &jqv1.GetStatusResponse{Components: []*jqv1.ComponentHealth{{Name: store, Healthy: true}}}))
		require.Contains(t, out.String(), "disabled on the server (kafka.enabled: false): "+want, store)
	}
}
