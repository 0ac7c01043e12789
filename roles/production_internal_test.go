package roles

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/config"
)

// Production is any listener of the role on a non-loopback address, or a worker's server elsewhere;
// --role=all defaults to loopback, the admin role listens on nothing.
func TestProductionIsANonLoopbackListener(t *testing.T) {
	t.Parallel()
	cfg := config.Default() // grpc.host "": every interface; health, metrics and worker.bind_host loopback
	require.True(t, production(Server, &cfg))
	require.False(t, production(Worker, &cfg), "a worker of localhost:50051 listening on loopback")
	cfg.Worker.ServerAddr = "jq-0.jq:50051,10.0.0.9:50051"
	require.True(t, production(Worker, &cfg), "a worker of a server elsewhere")
	cfg.Worker.ServerAddr = "localhost:50051,[::1]:50051"
	cfg.Worker.BindHost = ""
	require.True(t, production(Worker, &cfg), "worker.bind_host \"\": every interface")
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
