package health_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/health"
)

func readyz(t *testing.T, h http.Handler) (int, health.Body) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var b health.Body
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &b), rec.Body.String())
	return rec.Code, b
}

func TestReadyHandler(t *testing.T) {
	t.Parallel()
	var pgErr, redisErr atomic.Pointer[error]
	probe := func(p *atomic.Pointer[error]) func(context.Context) error {
		return func(context.Context) error {
			if e := p.Load(); e != nil {
				return *e
			}
			return nil
		}
	}
	var stopping atomic.Bool
	h := health.ReadyHandler(stopping.Load, time.Second, func() []health.Check {
		return []health.Check{
			{Name: "postgres", Critical: true, Probe: probe(&pgErr)},
			{Name: "redis", Probe: probe(&redisErr)},
		}
	})

	code, b := readyz(t, h)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, health.StatusOK, b.Status)
	require.Equal(t, health.CheckBody{Status: "ok", Critical: true, LatencyMS: b.Checks["postgres"].LatencyMS}, b.Checks["postgres"])
	require.Equal(t, "ok", b.Checks["redis"].Status)

	// A non-critical failure degrades but stays ready.
	down := errors.New("dial tcp 127.0.0.1:6379: connection refused")
	redisErr.Store(&down)
	code, b = readyz(t, h)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, health.StatusDegraded, b.Status)
	require.Equal(t, "degraded", b.Checks["redis"].Status)
	require.Equal(t, down.Error(), b.Checks["redis"].Error)

	// A critical failure makes it unavailable.
	pgDown := errors.New("postgres: ping: connection refused")
	pgErr.Store(&pgDown)
	code, b = readyz(t, h)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, health.StatusUnavailable, b.Status)
	require.Equal(t, "failing", b.Checks["postgres"].Status)
	require.Equal(t, pgDown.Error(), b.Checks["postgres"].Error)

	// Shutting down wins over everything, healthy or not.
	pgErr.Store(nil)
	redisErr.Store(nil)
	stopping.Store(true)
	code, b = readyz(t, h)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, health.Body{Status: health.StatusUnavailable, Reason: "shutting down"}, b)
}

func TestLiveHandler(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	health.LiveHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.JSONEq(t, `{"status":"ok"}`, rec.Body.String())
}

func TestStateCheck(t *testing.T) {
	t.Parallel()
	bad := true
	c := health.StateCheck("registered", func() bool { return bad }, errors.New("not registered"))
	require.True(t, c.Critical)
	require.EqualError(t, c.Probe(context.Background()), "not registered")
	bad = false
	require.NoError(t, c.Probe(context.Background()))
}
