package executor_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue/executor"
	"github.com/jq-dev/jq/queue/executor/executortest"
)

// TestAbuseSelfFencing: a worker that cannot renew its lease (heartbeats and registrations fail, as
// in a network cut) cancels its running job before the server's heartbeat timeout, counted
// from the last renewal that got through, could hand the job to another worker; its failure
// report is retryable.
func TestAbuseSelfFencing(t *testing.T) {
	t.Parallel()
	const interval = 200 * time.Millisecond // the fake's timeout is 6 intervals: 1.2 s
	b := setup(t, func(c *config) { c.server.HeartbeatInterval = interval })
	g := newGate()
	b.mux.Register("gate", g)
	b.start(t)
	job := newJob("gate", "")
	b.srv.Submit(job)
	g.waitStarted(t, 1)
	// Renewals keep it running well past the timeout.
	hbs := len(b.srv.Heartbeats())
	eventually(t, 10*time.Second, func() bool { return len(b.srv.Heartbeats()) >= hbs+8 }, "heartbeats continue")
	require.Nil(t, g.cause(job.ID), "a renewed lease is not fenced")

	// The cut: nothing renews any more. The last renewal got through before cut.
	cut := time.Now()
	b.srv.Fail(executortest.MethodHeartbeat, slices.Repeat([]error{executor.ErrUnreachable}, 10000)...)
	b.srv.Fail(executortest.MethodRegister, slices.Repeat([]error{executor.ErrUnreachable}, 10000)...)
	d := b.waitDone(t)
	fencedAfter := time.Since(cut)
	require.Equal(t, job.ID, d.Job.ID)
	require.Equal(t, executor.OutcomeFailed, d.Outcome)
	require.ErrorContains(t, g.cause(job.ID), "lease not renewed in time")
	require.Less(t, fencedAfter, 6*interval, "fenced before the server's timeout")
	require.EqualValues(t, 1, b.exec.Stats().Fenced)
	t.Logf("fenced %v after the cut (server timeout %v)", fencedAfter.Round(time.Millisecond), 6*interval)
}
