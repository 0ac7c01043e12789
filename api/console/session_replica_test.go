package console_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSessionIsPerProcess pins what docs/console.md and the Helm chart's sticky console Service
// rely on: a session cookie opens only in the server process that signed the user in. A second
// server that accepts the very same API token does not open it (the user signs in again there);
// the first still does.
func TestSessionIsPerProcess(t *testing.T) {
	t.Parallel()
	first := start(t)
	second := startWith(t, first.tokens)

	b := first.signedIn(t, "admin")
	var session *http.Cookie
	for _, c := range b.cookies() {
		if c.Name == "jq_console" {
			session = c
		}
	}
	require.NotNil(t, session)

	open := func(e *env) *http.Response {
		req, err := http.NewRequest(http.MethodGet, e.ui+"/", nil)
		require.NoError(t, err)
		req.AddCookie(session)
		resp, _ := e.browser(t).do(req)
		return resp
	}
	require.Equal(t, http.StatusOK, open(first).StatusCode, "the server that signed the user in opens the cookie")
	resp := open(second)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "another server does not")
	require.Equal(t, "/login", resp.Header.Get("Location"))
	second.signedIn(t, "admin") // the same token signs in there
}
