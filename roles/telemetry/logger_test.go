package telemetry_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/jq-dev/jq/roles/telemetry"
)

func TestLoggerJSONFields(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log, err := telemetry.NewLogger(telemetry.LoggerOptions{Level: "info", Format: "json", Service: "jq-server", Out: &buf})
	require.NoError(t, err)
	log.Debug("hidden")
	log.Info("server started", zap.Int("grpc_port", 50051))
	var line map[string]any
	require.NoError(t, json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &line), buf.String())
	require.Equal(t, "info", line["level"])
	require.Equal(t, "jq-server", line["service"])
	require.Equal(t, "server started", line["message"])
	require.NotEmpty(t, line["timestamp"])
	require.EqualValues(t, 50051, line["grpc_port"])
}

func TestLoggerLevels(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log, err := telemetry.NewLogger(telemetry.LoggerOptions{Level: "trace", Service: "jq-worker", Out: &buf})
	require.NoError(t, err)
	log.Check(telemetry.TraceLevel, "very chatty").Write()
	require.Contains(t, buf.String(), `"level":"trace"`)

	_, err = telemetry.NewLogger(telemetry.LoggerOptions{Level: "loud"})
	require.ErrorContains(t, err, `unknown log level "loud"`)
	_, err = telemetry.NewLogger(telemetry.LoggerOptions{Format: "xml"})
	require.ErrorContains(t, err, `unknown log format "xml"`)
}
