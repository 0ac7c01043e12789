package ctxtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/ctxtime"
)

func TestSleep(t *testing.T) {
	t.Parallel()
	require.True(t, ctxtime.Sleep(context.Background(), time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.False(t, ctxtime.Sleep(ctx, time.Hour), "an ended context ends the wait")
}
