package queue_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
)

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	base := errors.New("busy")
	require.NoError(t, queue.RetryAfter(nil, time.Second))

	err := fmt.Errorf("http: %w", queue.RetryAfter(base, 30*time.Second))
	require.ErrorIs(t, err, base)
	require.Equal(t, "http: busy", err.Error())
	require.Equal(t, 30*time.Second, queue.RetryAfterOf(err))
	require.False(t, queue.IsPermanent(err))
	var ra *queue.RetryAfterError
	require.ErrorAs(t, err, &ra)

	require.Zero(t, queue.RetryAfterOf(base))
	require.Zero(t, queue.RetryAfterOf(nil))
	require.Zero(t, queue.RetryAfterOf(queue.RetryAfter(base, -time.Second)), "negative: the backoff alone")

	// Permanent wins, whichever mark is outside.
	require.Zero(t, queue.RetryAfterOf(queue.Permanent(queue.RetryAfter(base, time.Minute))))
	require.Zero(t, queue.RetryAfterOf(queue.RetryAfter(queue.Permanent(base), time.Minute)))
	require.True(t, queue.IsPermanent(queue.RetryAfter(queue.Permanent(base), time.Minute)))
}
