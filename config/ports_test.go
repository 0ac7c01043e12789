package config_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/config"
)

func TestLoadPortOffsetMovesEveryListenPort(t *testing.T) {
	t.Parallel()
	cfg, _, err := config.Load(config.LoadOptions{Environ: []string{"JQ_PORT_OFFSET=100", "JQ_HEALTH_PORT=18080"}})
	require.NoError(t, err)
	require.Equal(t, 50151, cfg.GRPC.Port)
	require.Equal(t, 18180, cfg.Health.Port, "an explicit port moves too: the offset is per instance")
	require.Equal(t, 9190, cfg.Metrics.Port)
	require.Equal(t, 8188, cfg.UI.Port)
	require.Equal(t, 8181, cfg.Worker.HealthPort)
	require.Equal(t, 9191, cfg.Worker.MetricsPort)
	require.Equal(t, 9192, cfg.Producer.MetricsPort)
	require.Equal(t, "localhost:50051", cfg.Worker.ServerAddr, "addresses this process connects to are not moved")

	// --print-config's output loads back to the same ports.
	out, err := cfg.YAML()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "printed.yaml")
	require.NoError(t, os.WriteFile(path, out, 0o600))
	again, _, err := config.Load(config.LoadOptions{File: path})
	require.NoError(t, err)
	require.Equal(t, cfg.GRPC.Port, again.GRPC.Port)
	require.Equal(t, cfg.UI.Port, again.UI.Port)

	_, _, err = config.Load(config.LoadOptions{Flags: map[string]any{"port_offset": 20000}})
	require.ErrorContains(t, err, "grpc.port: must be a port between 1 and 65535, got 70051 (port_offset 20000 included)")
}

func TestListenErrorNamesTheSettings(t *testing.T) {
	t.Parallel()
	first, err := config.Listen("health", "health.port", "127.0.0.1", 0)
	require.NoError(t, err)
	defer first.Close()
	port := first.Addr().(*net.TCPAddr).Port
	_, err = config.Listen("health", "health.port", "127.0.0.1", port)
	require.Error(t, err)
	require.ErrorIs(t, err, syscall.EADDRINUSE)
	require.Equal(t, fmt.Sprintf("listen health: 127.0.0.1:%d is already in use (another jq on this host?): "+
		"set port_offset (--port-offset, JQ_PORT_OFFSET) to move every port of this process, "+
		"or health.port (JQ_HEALTH_PORT) for this one alone", port), err.Error())
}
