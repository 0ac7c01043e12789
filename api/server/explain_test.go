package apiserver_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/api/server"
)

// curl without a Content-Type, or with the wrong method, is told what to send instead of getting
// an empty answer.
func TestRefusedRequestsSayWhy(t *testing.T) {
	t.Parallel()
	addr := serveAddr(t, apiserver.Options{Store: testStore})
	url := "http://" + addr + "/jq.v1.JobService/GetJob"
	for _, c := range []struct {
		method, contentType string
		code                int
		body                string
	}{
		{http.MethodPost, "", http.StatusUnsupportedMediaType, "unsupported or missing Content-Type: send application/json"},
		{http.MethodPost, "text/plain", http.StatusUnsupportedMediaType, "unsupported or missing Content-Type"},
		{http.MethodPut, "application/json", http.StatusMethodNotAllowed, "method PUT not allowed: use POST"},
	} {
		req, err := http.NewRequestWithContext(t.Context(), c.method, url, strings.NewReader(`{}`))
		require.NoError(t, err)
		if c.contentType != "" {
			req.Header.Set("Content-Type", c.contentType)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, c.code, resp.StatusCode, "%s %q", c.method, c.contentType)
		require.Contains(t, string(body), c.body)
		require.Equal(t, 1, strings.Count(string(body), "\n"), "one line: %q", body)
	}
}
