package e2e

// End-to-end test of the pprof default with the real binary: the
// profiler is only served with metrics.pprof.

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/test/internal/jqbin"
)

// TestPprofOnlyWhenEnabledE2E: the server's metrics port serves /metrics but
// not /debug/pprof/ by default; with metrics.pprof it serves both.
func TestPprofOnlyWhenEnabledE2E(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	stock := c.startServer()
	profiled := c.startServer("JQ_METRICS_PPROF=true")
	for _, tc := range []struct {
		se    jqbin.ServerEnv
		pprof int
	}{{stock, http.StatusNotFound}, {profiled, http.StatusOK}} {
		base := "http://127.0.0.1:" + strconv.Itoa(tc.se.MetricsPort)
		require.Equal(t, http.StatusOK, httpStatus(t, base+"/metrics"))
		require.Equal(t, tc.pprof, httpStatus(t, base+"/debug/pprof/"))
		require.Equal(t, tc.pprof, httpStatus(t, base+"/debug/pprof/goroutine?debug=1"))
	}
}

func httpStatus(t *testing.T, url string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = res.Body.Close()
	return res.StatusCode
}
