package roles

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/config"
)

// Production is any listener of the role on a non-loopback address; --role=all defaults to
// loopback, the admin role listens on nothing.
func TestProductionIsANonLoopbackListener(t *testing.T) {
	t.Parallel()
	cfg := config.Default() // grpc.host and worker.bind_host "": every interface
	require.True(t, production(Server, &cfg))
	require.True(t, production(Worker, &cfg))
	require.False(t, production(All, &cfg), "--role=all listens on 127.0.0.1 by default")
	require.Empty(t, cfg.GRPC.Host, "the caller's configuration is not changed")
	require.False(t, production(Admin, &cfg))
	require.False(t, production(Producer, &cfg), "a producer without a metrics listener")

	cfg.GRPC.Host, cfg.Worker.BindHost = "127.0.0.1", "::1"
	require.False(t, production(Server, &cfg))
	require.False(t, production(Worker, &cfg))
	cfg.Worker.BindHost = "10.0.0.5"
	require.True(t, production(Worker, &cfg))
	require.True(t, production(All, &cfg), "any of its listeners")

	cfg.Producer.MetricsPort, cfg.Producer.ScanDir = 9092, "/in"
	cfg.Metrics.Enabled = true
	require.True(t, production(Producer, &cfg), "a watching producer's metrics on every interface")
	cfg.Producer.Once = true
	require.False(t, production(Producer, &cfg), "--once serves no metrics")
}
