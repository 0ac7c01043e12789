package console_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
	"github.com/jq-dev/jq/internal/testenv/jqserver"
)

// TestForgedHostAndOriginRefused: a loopback server with authentication off (what a DNS
// rebinding page would reach) refuses a Host that is not one of its names on the API and on the
// console, and the console refuses an Origin that is not its own or loopback — the forged
// Host+Origin pair that submitted, paused and deleted through the console included. Nothing
// changes. Its real names, and server.allowed_hosts, are served.
func TestForgedHostAndOriginRefused(t *testing.T) {
	t.Parallel()
	uiPort := freePort(t)
	srv := jqserver.Start(t, "JQ_UI_ENABLED=true", "JQ_UI_PORT="+strconv.Itoa(uiPort), "JQ_SERVER_ALLOWED_HOSTS=jq.test")
	queues := jqv1connect.NewQueueServiceClient(http.DefaultClient, "http://"+srv.Addr)
	paused := func() bool {
		resp, err := queues.GetQueue(ctx(t), connect.NewRequest(&jqv1.GetQueueRequest{Name: "default"}))
		require.NoError(t, err)
		return resp.Msg.GetQueue().GetPaused()
	}
	send := func(method, url, host, origin string, body string, header http.Header) (int, string) {
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		require.NoError(t, err)
		for k, v := range header {
			req.Header[k] = v
		}
		if host != "" {
			req.Host = host
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, b := (&browser{t: t, hc: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}}}).do(req)
		return resp.StatusCode, b
	}
	json := http.Header{"Content-Type": {"application/json"}}
	pause := "http://" + srv.Addr + "/jq.v1.QueueService/PauseQueue"
	_, port, _ := strings.Cut(srv.Addr, ":")

	// The API.
	code, body := send(http.MethodPost, pause, "evil.example:"+port, "", `{"name":"default"}`, json)
	require.Equal(t, http.StatusForbidden, code, body)
	require.Contains(t, body, `Host "evil.example:`+port+`" is not a name of this server`)
	code, _ = send(http.MethodPost, pause, "evil.example:"+port, "http://evil.example:"+port, `{"name":"default"}`, json)
	require.Equal(t, http.StatusForbidden, code)
	code, _ = send(http.MethodPost, pause, "", "http://evil.example", `{"name":"default"}`, json)
	require.Equal(t, http.StatusForbidden, code, "another site's page, by address")
	require.False(t, paused())

	// The console: a session and its CSRF token, as the attack had them.
	e := &env{ui: "http://127.0.0.1:" + strconv.Itoa(uiPort)}
	b := e.browser(t)
	csrf := b.csrf()
	var cookie string
	for _, c := range b.cookies() {
		cookie += c.Name + "=" + c.Value
	}
	action := func(host, origin string) int {
		h := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Cookie": {cookie}}
		form := url.Values{"name": {"default"}, "confirmed": {"yes"}, "csrf": {csrf}}
		code, _ := send(http.MethodPost, e.ui+"/actions/queue-pause", host, origin, form.Encode(), h)
		return code
	}
	uiHost := "127.0.0.1:" + strconv.Itoa(uiPort)
	forged := "evil.example:" + strconv.Itoa(uiPort)
	require.Equal(t, http.StatusForbidden, action(forged, "http://"+forged), "the rebinding pair")
	require.Equal(t, http.StatusForbidden, action(uiHost, "http://evil.example"), "another site's Origin")
	require.Equal(t, http.StatusForbidden, action(uiHost, "http://10.9.8.7:"+strconv.Itoa(uiPort)), "a non-loopback address's page")
	code, _ = send(http.MethodGet, e.ui+"/", forged, "", "", nil)
	require.Equal(t, http.StatusForbidden, code, "pages too")
	require.False(t, paused())

	// Its own names are served: loopback, localhost, server.allowed_hosts.
	code, _ = send(http.MethodGet, e.ui+"/", "localhost:"+strconv.Itoa(uiPort), "", "", http.Header{"Cookie": {cookie}})
	require.Equal(t, http.StatusOK, code)
	code, _ = send(http.MethodGet, e.ui+"/", "jq.test:"+strconv.Itoa(uiPort), "", "", http.Header{"Cookie": {cookie}})
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, http.StatusSeeOther, action(uiHost, "http://"+uiHost))
	require.True(t, paused())
}
