package health_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/health"
)

func TestRun(t *testing.T) {
	t.Parallel()
	ok := func(context.Context) error { return nil }
	bad := func(context.Context) error { return errors.New("connection refused") }
	slow := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }

	res := health.Run(context.Background(), 50*time.Millisecond, []health.Check{
		{Name: "postgres", Critical: true, Probe: ok},
		{Name: "redis", Probe: bad},
		{Name: "kafka", Probe: slow},
	})
	require.Len(t, res, 3)
	require.Equal(t, "postgres", res[0].Name)
	require.True(t, res[0].Healthy)
	require.False(t, res[1].Healthy)
	require.Equal(t, "connection refused", res[1].Detail)
	require.False(t, res[2].Healthy)
	require.Contains(t, res[2].Detail, "deadline exceeded")
	require.True(t, health.Ready(res), "only non-critical checks failed")
	require.False(t, health.AllHealthy(res))

	res = health.Run(context.Background(), time.Second, []health.Check{{Name: "postgres", Critical: true, Probe: bad}})
	require.False(t, health.Ready(res))
}
