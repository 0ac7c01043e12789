package roles

import (
	"context"

	"go.uber.org/zap"

	"github.com/jq-dev/jq/api/server"
	"github.com/jq-dev/jq/config"
	"github.com/jq-dev/jq/internal/buildinfo"
	"github.com/jq-dev/jq/roles/telemetry"
)

// startTracing builds one component's tracer provider (service.name jq-server
// or jq-worker: in --role=all each component exports under its own name). It
// contacts nothing; spans that cannot be exported are dropped, never a reason
// to fail.
func startTracing(ctx context.Context, cfg *config.Config, service string, log *zap.Logger) (*telemetry.Tracing, error) {
	tr, err := telemetry.NewTracing(ctx, telemetry.TracingOptions{
		Config: cfg.Tracing, Service: service, Version: buildinfo.Get().Version,
	})
	if err != nil {
		return nil, err
	}
	if tr.Enabled {
		log.Info("tracing enabled", zap.String("service", service), zap.String("protocol", cfg.Tracing.Protocol),
			zap.String("endpoint", cfg.Tracing.Endpoint), zap.Float64("sample_ratio", cfg.Tracing.SampleRatio))
	}
	return tr, nil
}

// stopTracing flushes the spans still buffered, within telemetry.ShutdownTimeout.
func stopTracing(ctx context.Context, tr *telemetry.Tracing, log *zap.Logger) {
	if err := tr.ShutdownWithTimeout(ctx); err != nil {
		log.Warn("tracing flush on exit failed; the last spans are lost", zap.Error(err))
	}
}

// apiTracing is the API's tracing (none when disabled).
func apiTracing(tr *telemetry.Tracing) apiserver.Tracing {
	return apiserver.Tracing{Provider: tr.EnabledProvider(), Propagator: tr.Propagator}
}
