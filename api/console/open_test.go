package console_test

import (
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
	"github.com/jq-dev/jq/internal/testenv/jqserver"
)

// TestConsoleWithAuthenticationOff: a loopback server without credentials serves an open console,
// as its API is open; the actions still need the session's CSRF token, which a visitor gets with
// its first page.
func TestConsoleWithAuthenticationOff(t *testing.T) {
	t.Parallel()
	uiPort := freePort(t)
	srv := jqserver.Start(t, "JQ_UI_ENABLED=true", "JQ_UI_PORT="+strconv.Itoa(uiPort))
	queues := jqv1connect.NewQueueServiceClient(http.DefaultClient, "http://"+srv.Addr)
	paused := func() bool {
		resp, err := queues.GetQueue(ctx(t), connect.NewRequest(&jqv1.GetQueueRequest{Name: "default"}))
		require.NoError(t, err)
		return resp.Msg.GetQueue().GetPaused()
	}
	e := &env{ui: "http://127.0.0.1:" + strconv.Itoa(uiPort)}
	b := e.browser(t)

	resp, body := b.get("/", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "authentication off")
	_, body = b.get("/queues/default", nil)
	require.Contains(t, body, `action="/actions/queue-pause"`, "everyone may do everything, as on the API")
	resp, _ = b.get("/login", nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "nothing to sign in to")

	// Another site's form, or one without the token: refused, nothing changes.
	resp, _ = b.post("/actions/queue-pause", url.Values{"name": {"default"}, "confirmed": {"yes"}}, nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	fresh := e.browser(t) // a browser without the console's cookie, as a cross-site request would be
	resp, _ = fresh.post("/actions/queue-pause", url.Values{"name": {"default"}, "confirmed": {"yes"}, "csrf": {b.csrf()}}, nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "a token is good only with its own session")
	require.False(t, paused())

	_, flash := b.act("queue-pause", url.Values{"name": {"default"}})
	require.Equal(t, "queue default paused", flash)
	require.True(t, paused())
}
