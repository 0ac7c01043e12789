package hostcheck_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/hostcheck"
)

func TestHostAndOrigin(t *testing.T) {
	t.Parallel()
	p := hostcheck.New(hostcheck.Options{Listen: "jq.internal", Extra: []string{"Jq.LAN."}, Enforce: true})
	for host, ok := range map[string]bool{
		"127.0.0.1:8088": true, "[::1]:50051": true, "10.1.2.3": true, "localhost:8088": true, "LOCALHOST": true,
		"app.localhost:1": true, "jq.internal:50051": true, "jq.lan": true, "jq.lan.:1": true,
		"evil.example:8088": false, "localhost.evil.example": false, "jq.internal.evil.example": false, "": false,
	} {
		require.Equal(t, ok, p.HostAllowed(host), host)
	}
	for origin, ok := range map[string]bool{
		"http://127.0.0.1:8088": true, "http://[::1]:8088": true, "http://localhost:8088": true, "https://jq.lan": true,
		"http://10.1.2.3": false, "http://evil.example:8088": false, "null": false, "file://": false, "": false,
	} {
		require.Equal(t, ok, p.OriginAllowed(origin), origin)
	}
}

func TestHandler(t *testing.T) {
	t.Parallel()
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	serve := func(p *hostcheck.Policy, host, origin string) (int, string) {
		r := httptest.NewRequest(http.MethodPost, "http://"+host+"/x", nil)
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		w := httptest.NewRecorder()
		p.Handler(ok).ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}
	loop := hostcheck.ForListener("127.0.0.1", false, nil)
	code, body := serve(loop, "evil.example:8088", "http://evil.example:8088")
	require.Equal(t, http.StatusForbidden, code)
	require.Equal(t, "refused: Host \"evil.example:8088\" is not a name of this server (an address, localhost, its listen host, or server.allowed_hosts)\n", body)
	code, body = serve(loop, "127.0.0.1:8088", "http://evil.example")
	require.Equal(t, http.StatusForbidden, code)
	require.Contains(t, body, `Origin "http://evil.example" is not this server's`)
	code, _ = serve(loop, "127.0.0.1:8088", "http://127.0.0.1:8088")
	require.Equal(t, http.StatusOK, code)
	code, _ = serve(loop, "localhost:8088", "")
	require.Equal(t, http.StatusOK, code)

	// On the network with credentials required, clients use whatever names the network has.
	code, _ = serve(hostcheck.ForListener("", false, nil), "jq-server.prod.svc:50051", "")
	require.Equal(t, http.StatusOK, code)
	// Open (authentication off) on every interface: checked all the same.
	code, _ = serve(hostcheck.ForListener("0.0.0.0", true, nil), "evil.example", "")
	require.Equal(t, http.StatusForbidden, code)
	code, _ = serve(hostcheck.ForListener("0.0.0.0", true, []string{"jq.lan"}), "jq.lan:50051", "")
	require.Equal(t, http.StatusOK, code)
}
