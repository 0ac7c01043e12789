// Package telemetry builds the process-wide observability objects — the
// logger, the metrics registry and its collectors, the tracer provider — once, in
// roles, and passes them down. Nothing in jq reaches for a global logger.
package telemetry

import (
	"fmt"
	"io"
	"os"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// TraceLevel is below zap's Debug; `--log-level=trace` enables it.
const TraceLevel = zapcore.DebugLevel - 1

// ParseLevel maps jq's level names (trace|debug|info|warn|error) to zap levels.
func ParseLevel(s string) (zapcore.Level, error) {
	switch strings.ToLower(s) {
	case "trace":
		return TraceLevel, nil
	case "debug":
		return zapcore.DebugLevel, nil
	case "info", "":
		return zapcore.InfoLevel, nil
	case "warn", "warning":
		return zapcore.WarnLevel, nil
	case "error":
		return zapcore.ErrorLevel, nil
	}
	return 0, fmt.Errorf("unknown log level %q (want trace, debug, info, warn or error)", s)
}

// LoggerOptions selects the level, the encoding and the service name that
// every line carries (FR-041: timestamp, level, service, message).
type LoggerOptions struct {
	Level   string
	Format  string // json | text
	Service string // jq-server, jq-worker, jq-admin, ...
	Out     io.Writer
}

// NewLogger returns a zap logger writing structured lines to opts.Out
// (stdout when nil).
func NewLogger(opts LoggerOptions) (*zap.Logger, error) {
	lvl, err := ParseLevel(opts.Level)
	if err != nil {
		return nil, err
	}
	encCfg := zapcore.EncoderConfig{
		TimeKey:        "timestamp",
		LevelKey:       "level",
		NameKey:        "logger",
		CallerKey:      "",
		MessageKey:     "message",
		StacktraceKey:  "",
		LineEnding:     zapcore.DefaultLineEnding,
		EncodeLevel:    encodeLevel,
		EncodeTime:     zapcore.RFC3339NanoTimeEncoder,
		EncodeDuration: zapcore.StringDurationEncoder,
	}
	var enc zapcore.Encoder
	switch strings.ToLower(opts.Format) {
	case "json", "":
		enc = zapcore.NewJSONEncoder(encCfg)
	case "text":
		enc = zapcore.NewConsoleEncoder(encCfg)
	default:
		return nil, fmt.Errorf("unknown log format %q (want json or text)", opts.Format)
	}
	out := opts.Out
	if out == nil {
		out = os.Stdout
	}
	core := zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(out)), lvl)
	return zap.New(core).With(zap.String("service", opts.Service)), nil
}

func encodeLevel(l zapcore.Level, enc zapcore.PrimitiveArrayEncoder) {
	if l == TraceLevel {
		enc.AppendString("trace")
		return
	}
	enc.AppendString(l.String())
}
