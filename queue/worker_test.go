package queue_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
)

// A typed worker takes only its types; one without types takes every type; only ONLINE workers of
// the queue count, and Waiting names what nobody takes.
func TestWorkerHandlesAndWaiting(t *testing.T) {
	t.Parallel()
	greeter := &queue.Worker{Status: queue.WorkerOnline, Queues: []string{"default"}, Types: []string{"greet"}}
	builtin := &queue.Worker{Status: queue.WorkerOnline, Queues: []string{"default"}, Types: []string{"noop", "sleep"}}
	catchAll := &queue.Worker{Status: queue.WorkerOnline, Queues: []string{"default"}}
	draining := &queue.Worker{Status: queue.WorkerDraining, Queues: []string{"default"}}

	require.True(t, greeter.Handles("default", "greet"))
	require.False(t, greeter.Handles("default", "noop"))
	require.False(t, greeter.Handles("other", "greet"))
	require.True(t, catchAll.Handles("default", "anything"))
	require.False(t, draining.Handles("default", "anything"), "a DRAINING worker takes no new job")

	typed := []*queue.Worker{greeter, builtin, draining}
	require.Empty(t, queue.Waiting("default", []string{"greet", "noop"}, typed))
	require.Equal(t, "no connected worker handles type email", queue.Waiting("default", []string{"greet", "email"}, typed))
	require.Equal(t, "no connected worker handles types email, exec", queue.Waiting("default", []string{"email", "noop", "exec", "email"}, typed))
	require.Empty(t, queue.Waiting("default", []string{"email"}, append(typed, catchAll)), "a worker of every type takes it")
	require.Equal(t, "no connected worker serves queue other", queue.Waiting("other", []string{"greet"}, typed))
	require.Equal(t, "no connected worker serves queue default", queue.Waiting("default", []string{"greet"}, []*queue.Worker{draining}))
	require.Empty(t, queue.Waiting("default", nil, nil), "no due job: nothing waits")
}

// Resume undoes a drain only: a worker told to shut down, or OFFLINE, stays as it is.
func TestResume(t *testing.T) {
	t.Parallel()
	to, change, err := queue.Resume(&queue.Worker{ID: "w", Status: queue.WorkerDraining})
	require.NoError(t, err)
	require.True(t, change)
	require.Equal(t, queue.WorkerOnline, to)
	to, change, err = queue.Resume(&queue.Worker{ID: "w", Status: queue.WorkerOnline})
	require.NoError(t, err)
	require.False(t, change)
	require.Equal(t, queue.WorkerOnline, to)
	_, _, err = queue.Resume(&queue.Worker{ID: "w", Status: queue.WorkerDraining, ShutdownRequested: true})
	require.ErrorIs(t, err, queue.ErrIllegalTransition)
	require.ErrorContains(t, err, "told to shut down")
	_, _, err = queue.Resume(&queue.Worker{ID: "w", Status: queue.WorkerOffline})
	require.ErrorIs(t, err, queue.ErrIllegalTransition)
}
