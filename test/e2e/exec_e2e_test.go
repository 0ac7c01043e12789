package e2e

// End-to-end test of the exec default with the real binary: the exec
// handler is off unless enabled with an allow-list of programs.

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
)

// program is the absolute path of a program from the test's PATH, for an exec
// job's argv[0] and the worker's allow-list.
func program(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	require.NoError(t, err)
	require.True(t, filepath.IsAbs(p), p)
	return p
}

// execEnv enables a worker's exec handler for exactly progs.
func execEnv(progs ...string) []string {
	return []string{"JQ_WORKER_EXEC_ENABLED=true", "JQ_WORKER_EXEC_ALLOW=" + strings.Join(progs, ",")}
}

// TestExecAllowListE2E: a stock worker dead-letters an exec job at once with a
// message saying exec is disabled; a worker with exec enabled runs a listed
// program to DONE and dead-letters an unlisted one at once. "At once": the
// queues allow 3 retries, yet each failed job has run one attempt.
func TestExecAllowListE2E(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startServer("JQ_SCHEDULER_REAPER_INTERVAL_MS=200")
	ctx := c.ctx()
	for _, q := range []string{"exec-off", "exec-on"} {
		retries := int32(3)
		_, err := c.client.Queues.CreateQueue(ctx, connect.NewRequest(&jqv1.CreateQueueRequest{Name: q, MaxRetries: &retries}))
		require.NoError(t, err)
	}
	echo := program(t, "echo")
	c.startFastWorker("w-exec-stock", "exec-off")
	c.startFastWorker("w-exec-allow", "exec-on", execEnv(echo)...)

	submit := func(q, argv0 string, args ...string) string {
		return c.submit(ctx, &jqv1.JobSpec{Queue: q, Type: "exec", KeepResult: true,
			Payload: []byte(`{"argv":[` + quoteAll(append([]string{argv0}, args...)) + `]}`)})
	}
	off := submit("exec-off", echo, "hello")
	ran := submit("exec-on", echo, "hello")
	shell := submit("exec-on", "/bin/sh", "-c", "echo hello")
	relative := submit("exec-on", "echo", "hello")

	done := c.waitState(ctx, ran, jqv1.JobState_JOB_STATE_DONE)
	require.Equal(t, "hello\n", string(done.GetResult().GetData()))
	require.Equal(t, "w-exec-allow", done.GetWorkerId())

	for id, msg := range map[string]string{
		off:      "exec handler is disabled on this worker (worker.exec.enabled)",
		shell:    "exec: /bin/sh is not in worker.exec.allow",
		relative: `exec: "echo" is not in worker.exec.allow: argv[0] must be an absolute path (no PATH lookup)`,
	} {
		j := c.waitState(ctx, id, jqv1.JobState_JOB_STATE_DEAD_LETTERED)
		require.Equal(t, msg, j.GetLastError())
		require.Equal(t, "permanent_failure", j.GetFailureReason(), "why it was dead-lettered: the handler said do not retry")
		require.EqualValues(t, 1, j.GetAttempt(), "not retried")
		require.EqualValues(t, 3, j.GetMaxRetries())
		evs, err := c.client.Jobs.ListJobEvents(ctx, connect.NewRequest(&jqv1.ListJobEventsRequest{JobId: id}))
		require.NoError(t, err)
		last := evs.Msg.GetEvents()[len(evs.Msg.GetEvents())-1]
		require.Equal(t, jqv1.JobState_JOB_STATE_FAILED, last.GetFromState())
		require.Equal(t, jqv1.JobState_JOB_STATE_DEAD_LETTERED, last.GetToState())
		require.Equal(t, "permanent_failure", last.GetReason())
	}
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ",")
}
