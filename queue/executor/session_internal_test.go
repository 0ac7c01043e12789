package executor

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/jq-dev/jq/queue"
)

// downConn is a server that never answers a registration; its ends-th Register call cancels
// the session loop's context.
type downConn struct {
	Conn   // the session loop calls only Register before a registration succeeds
	calls  atomic.Int32
	ends   int32
	cancel context.CancelFunc
}

func (c *downConn) Register(context.Context, RegisterParams) (Registration, error) {
	if c.calls.Add(1) == c.ends {
		c.cancel()
	}
	return Registration{}, fmt.Errorf("register worker: %w", ErrUnreachable)
}

// registerWarnings runs the session loop against a server that is down until attempts
// registrations have failed (the last one ends the loop) and counts its warnings.
func registerWarnings(t *testing.T, grace time.Duration, everRegistered bool, attempts int32) int {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conn := &downConn{ends: attempts, cancel: cancel}
	e, err := New(Options{
		Conn: conn, Handler: queue.NewMux(), Concurrency: 1, Queues: []string{"q"}, Logger: zap.New(core),
		MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
	})
	require.NoError(t, err)
	e.registerGrace = grace
	e.everRegistered.Store(everRegistered)
	require.NoError(t, e.sessionLoop(ctx))
	require.Equal(t, attempts, conn.calls.Load())
	return logs.FilterLevelExact(zapcore.WarnLevel).Len()
}

// A worker started beside its server retries quietly during the start-up grace; past it, or once
// it has registered (a server restart), the second failure in a row warns, then every tenth.
func TestRegisterWarnsAfterStartGrace(t *testing.T) {
	t.Parallel()
	require.Equal(t, 0, registerWarnings(t, time.Hour, false, 25), "within the start-up grace")
	// Failures 1..20 are logged: the 2nd, 10th and 20th warn.
	require.Equal(t, 3, registerWarnings(t, 0, false, 21), "past the start-up grace")
	require.Equal(t, 3, registerWarnings(t, time.Hour, true, 21), "registered before: no grace")
}
