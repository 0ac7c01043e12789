package console_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/api/auth"
	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/internal/testenv/jqserver"
)

// TestConsoleOverTLSWithAClientCertificate: with the API on TLS the console is too, its cookie is
// Secure, and a browser with a client certificate mapped by auth.mtls_principals signs in with it.
func TestConsoleOverTLSWithAClientCertificate(t *testing.T) {
	t.Parallel()
	ca := testenv.NewCA(t, "console")
	srvCert, ops := ca.Server("jq"), ca.Client("ops", nil)
	viewerTok, err := auth.NewToken()
	require.NoError(t, err)
	viewer := auth.TokenEntry{Name: "viewer-user", Roles: []auth.Role{auth.RoleViewer}, SHA256: auth.HashToken(viewerTok)}.String()
	uiPort := freePort(t)
	jqserver.Start(t, "JQ_UI_ENABLED=true", "JQ_UI_PORT="+strconv.Itoa(uiPort),
		"JQ_GRPC_TLS_ENABLED=true", "JQ_GRPC_TLS_CERT_PATH="+srvCert.CertFile, "JQ_GRPC_TLS_KEY_PATH="+srvCert.KeyFile,
		"JQ_GRPC_TLS_CLIENT_CA_PATH="+ca.CertFile, "JQ_AUTH_ENABLED=true",
		"JQ_AUTH_MTLS_PRINCIPALS=cn=ops;roles=admin", "JQ_AUTH_TOKENS="+viewer)
	base := "https://127.0.0.1:" + strconv.Itoa(uiPort)

	pem, err := os.ReadFile(ca.CertFile)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(pem))
	client := func(cert *testenv.Cert) *browser {
		tc := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if cert != nil {
			c, err := tls.LoadX509KeyPair(cert.CertFile, cert.KeyFile)
			require.NoError(t, err)
			tc.Certificates = []tls.Certificate{c}
		}
		jar, err := cookiejar.New(nil)
		require.NoError(t, err)
		return &browser{t: t, base: base, hc: &http.Client{
			Jar: jar, Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tc},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}}
	}

	b := client(&ops)
	_, body := b.get("/login", nil)
	require.Contains(t, body, "Sign in with my client certificate")
	resp, _ := b.post("/login", url.Values{}, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	var secure bool
	for _, c := range resp.Cookies() {
		secure = secure || (c.Name == "jq_console" && c.Secure)
	}
	require.True(t, secure, "the session cookie is Secure over TLS")
	_, flash := b.act("queue-pause", url.Values{"name": {"default"}})
	require.Equal(t, "queue default paused", flash, "cert:cn:ops is an admin")
	_, body = b.get("/", nil)
	require.Contains(t, body, "cert:cn:ops")

	// Without a certificate: a token still works; nothing else does.
	v := client(nil)
	_, body = v.get("/login", nil)
	require.NotContains(t, body, "client certificate</button>")
	resp, body = v.post("/login", url.Values{}, nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, body, "unauthenticated: authentication required")
	resp, _ = v.post("/login", url.Values{"token": {viewerTok}}, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, body = v.get("/queues/default", nil)
	require.True(t, strings.Contains(body, "token:viewer-user") && !strings.Contains(body, `action="/actions/`))
}
