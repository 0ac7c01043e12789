package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSignInThrottled: an address that keeps guessing tokens is refused (429, Retry-After) before
// its token is checked, even when it finally sends the right one.
func TestSignInThrottled(t *testing.T) {
	t.Parallel()
	e := start(t)

	guesser := e.browser(t)
	statuses := map[int]int{}
	for range 8 {
		resp, _ := guesser.post("/login", url.Values{"token": {"jq_wrong-guess"}}, nil)
		statuses[resp.StatusCode]++
	}
	require.Positive(t, statuses[http.StatusUnauthorized], "the first guesses are checked")
	require.Positive(t, statuses[http.StatusTooManyRequests], "then refused: %v", statuses)
	resp, body := guesser.post("/login", url.Values{"token": {e.tokens["admin"]}}, nil)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "refused before the token is checked")
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	require.Contains(t, body, "too many sign-in attempts from 127.0.0.1")

	// The address waits out its budget, then signs in.
	require.Eventually(t, func() bool {
		resp, _ := guesser.post("/login", url.Values{"token": {e.tokens["admin"]}}, nil)
		return resp.StatusCode == http.StatusSeeOther
	}, 15*time.Second, 200*time.Millisecond)
}

// TestSignOutRevokesTheSession: a session cookie copied before sign-out opens nothing after it.
func TestSignOutRevokesTheSession(t *testing.T) {
	t.Parallel()
	e := start(t)
	b := e.signedIn(t, "admin")
	var cookie string
	for _, c := range b.cookies() {
		if c.Name == "jq_console" {
			cookie = c.Value
		}
	}
	require.NotEmpty(t, cookie)
	copied := func() int {
		req, err := http.NewRequest(http.MethodGet, e.ui+"/", nil)
		require.NoError(t, err)
		req.AddCookie(&http.Cookie{Name: "jq_console", Value: cookie})
		resp, _ := e.browser(t).do(req)
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, copied(), "the copy works while signed in")
	resp, _ := b.post("/logout", url.Values{"csrf": {b.csrf()}}, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.True(t, strings.HasSuffix(resp.Header.Get("Location"), "/login"))
	require.Equal(t, http.StatusSeeOther, copied(), "the copy is signed out too")
}
