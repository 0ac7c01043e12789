package queue_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
)

// legal is the specification written out independently of the implementation: FR-010's eight edges,
// FR-012's cancel of an assigned job and FR-013's manual retry of a dead-lettered one.
var legal = map[[2]queue.State]bool{
	{queue.StatePending, queue.StateAssigned}:      true,
	{queue.StateAssigned, queue.StateRunning}:      true,
	{queue.StateRunning, queue.StateDone}:          true,
	{queue.StateRunning, queue.StateFailed}:        true,
	{queue.StateFailed, queue.StatePending}:        true,
	{queue.StateFailed, queue.StateDeadLettered}:   true,
	{queue.StateAssigned, queue.StateFailed}:       true,
	{queue.StatePending, queue.StateDeadLettered}:  true,
	{queue.StateAssigned, queue.StateDeadLettered}: true,
	{queue.StateDeadLettered, queue.StatePending}:  true,
}

func TestTransitionTableEveryPair(t *testing.T) {
	t.Parallel()
	pairs := 0
	for _, from := range queue.States() {
		for _, to := range queue.States() {
			pairs++
			ok := legal[[2]queue.State{from, to}]
			require.Equal(t, ok, queue.CanTransition(from, to), "%s -> %s", from, to)
			err := queue.CheckTransition(from, to)
			if ok {
				require.NoError(t, err, "%s -> %s", from, to)
				continue
			}
			require.ErrorIs(t, err, queue.ErrIllegalTransition, "%s -> %s", from, to)
			var te *queue.TransitionError
			require.True(t, errors.As(err, &te))
			require.Equal(t, from, te.From)
			require.Equal(t, to, te.To)
			require.Contains(t, err.Error(), string(from))
			require.Contains(t, err.Error(), string(to))
		}
	}
	require.Equal(t, 36, pairs)
}

func TestTransitionUnknownStates(t *testing.T) {
	t.Parallel()
	for _, tc := range [][2]queue.State{
		{"", queue.StatePending},
		{queue.StatePending, ""},
		{"QUEUED", queue.StateRunning},
		{queue.StateRunning, "CANCELED"},
	} {
		require.False(t, queue.CanTransition(tc[0], tc[1]))
		require.ErrorIs(t, queue.CheckTransition(tc[0], tc[1]), queue.ErrIllegalTransition)
	}
	require.Contains(t, queue.CheckTransition("", queue.StateDone).Error(), "<none>")
}

func TestStateTerminal(t *testing.T) {
	t.Parallel()
	terminal := map[queue.State]bool{queue.StateDone: true, queue.StateDeadLettered: true}
	for _, s := range queue.States() {
		require.Equal(t, terminal[s], s.Terminal(), s)
	}
}

func TestParseStateRoundTrip(t *testing.T) {
	t.Parallel()
	require.Len(t, queue.States(), 6)
	for _, s := range queue.States() {
		require.True(t, s.Valid())
		for _, in := range []string{s.String(), lower(s.String()), " " + s.String() + " "} {
			got, err := queue.ParseState(in)
			require.NoError(t, err, in)
			require.Equal(t, s, got)
		}
	}
	got, err := queue.ParseState("Dead_Lettered")
	require.NoError(t, err)
	require.Equal(t, queue.StateDeadLettered, got)

	for _, bad := range []string{"", "QUEUED", "canceled", "DEADLETTERED", "PENDING!"} {
		_, err := queue.ParseState(bad)
		require.ErrorIs(t, err, queue.ErrInvalidArgument, bad)
		require.False(t, queue.State(bad).Valid())
	}
}

func TestParseWorkerStatus(t *testing.T) {
	t.Parallel()
	for _, s := range []queue.WorkerStatus{queue.WorkerOnline, queue.WorkerDraining, queue.WorkerOffline} {
		got, err := queue.ParseWorkerStatus(lower(s.String()))
		require.NoError(t, err)
		require.Equal(t, s, got)
		require.True(t, got.Valid())
	}
	_, err := queue.ParseWorkerStatus("busy")
	require.ErrorIs(t, err, queue.ErrInvalidArgument)
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
