package console

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The sign-in budgets: 5 attempts at once per address, then one a second; 40 at once in all, then
// 20 a second; a successful sign-in gives its places back.
func TestSignInLimiter(t *testing.T) {
	t.Parallel()
	l := newSignInLimiter()
	now := time.Unix(1_800_000_000, 0)
	for i := range signInPerSourceBurst {
		back, _ := l.attempt("10.0.0.1", now)
		require.NotNil(t, back, "attempt %d", i)
	}
	back, wait := l.attempt("10.0.0.1", now)
	require.Nil(t, back, "over the address's budget")
	require.Equal(t, time.Second, wait)
	require.Contains(t, signInRefusal("10.0.0.1", wait), "too many sign-in attempts from 10.0.0.1")
	back, _ = l.attempt("10.0.0.1", now.Add(time.Second))
	require.NotNil(t, back, "one more a second later")

	// The total: 8 addresses × 5 take it to 40; the next address is refused though it has tried
	// nothing.
	lt := newSignInLimiter()
	for i := range signInTotalBurst {
		back, _ := lt.attempt(fmt.Sprintf("10.0.1.%d", i/signInPerSourceBurst), now)
		require.NotNil(t, back, "attempt %d", i)
	}
	back, _ = lt.attempt("10.0.2.1", now)
	require.Nil(t, back, "over the total")

	// A success gives its places back.
	l2 := newSignInLimiter()
	for range 3 * signInPerSourceBurst {
		back, _ := l2.attempt("10.0.0.9", now)
		require.NotNil(t, back)
		back()
	}
}

// A revoked id stays revoked until the table is full of live entries; then revoke reports false
// (the console renews its keys) and starts afresh.
func TestRevocations(t *testing.T) {
	t.Parallel()
	var r revocations
	now := time.Unix(1_800_000_000, 0)
	require.True(t, r.revoke("a", now.Add(time.Hour).Unix(), now))
	require.True(t, r.has("a"))
	require.False(t, r.has("b"))
	for i := range maxRevoked - 1 {
		require.True(t, r.revoke(fmt.Sprint(i), now.Add(time.Hour).Unix(), now))
	}
	require.False(t, r.revoke("x", now.Add(time.Hour).Unix(), now), "full of live entries")
	require.False(t, r.has("a"))
	// Expired entries make room.
	var e revocations
	for i := range maxRevoked {
		require.True(t, e.revoke(fmt.Sprint(i), now.Unix(), now))
	}
	require.True(t, e.revoke("y", now.Add(time.Hour).Unix(), now.Add(time.Second)))
	require.True(t, e.has("y"))
}
