package queue_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
)

func TestFiresAllowedFollowsTheOverlapPolicy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy queue.OverlapPolicy
		prev   queue.State
		want   int
	}{
		{queue.OverlapSkip, "", 3},
		{queue.OverlapSkip, queue.StateDone, 3},
		{queue.OverlapSkip, queue.StateDeadLettered, 3},
		{queue.OverlapSkip, queue.StatePending, 0},
		{queue.OverlapSkip, queue.StateRunning, 0},
		{queue.OverlapSkip, queue.StateFailed, 0},
		{queue.OverlapBufferOne, queue.StatePending, 0},
		{queue.OverlapBufferOne, queue.StateFailed, 0},
		{queue.OverlapBufferOne, queue.StateAssigned, 1},
		{queue.OverlapBufferOne, queue.StateRunning, 1},
		{queue.OverlapBufferOne, queue.StateDone, 3},
		{queue.OverlapAllowAll, queue.StatePending, 3},
		{queue.OverlapAllowAll, queue.StateRunning, 3},
	} {
		require.Equal(t, tc.want, queue.FiresAllowed(tc.policy, tc.prev, 3), "%s with the previous job %q", tc.policy, tc.prev)
	}
}

func TestValidateOverlap(t *testing.T) {
	t.Parallel()
	p, err := queue.ValidateOverlap("")
	require.NoError(t, err)
	require.Equal(t, queue.OverlapSkip, p)
	for _, ok := range []queue.OverlapPolicy{queue.OverlapSkip, queue.OverlapBufferOne, queue.OverlapAllowAll} {
		got, err := queue.ValidateOverlap(ok)
		require.NoError(t, err)
		require.Equal(t, ok, got)
	}
	_, err = queue.ValidateOverlap("sometimes")
	require.ErrorIs(t, err, queue.ErrInvalidArgument)
}
