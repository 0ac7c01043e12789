package netlimit_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/netlimit"
)

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// closedByServer reports whether the server closed c: a read ends with EOF (or a reset).
func closedByServer(t *testing.T, c net.Conn) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

func TestAbuseCapsCloseExtraConnections(t *testing.T) {
	t.Parallel()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var refused atomic.Int32
	ln := netlimit.Wrap(raw, netlimit.Options{Max: 3, PerSource: 2, Refused: func(string) { refused.Add(1) }})
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func(src string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		c, err := d.Dial("tcp", raw.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	a1, a2 := dial("127.0.0.1"), dial("127.0.0.1")
	<-accepted
	<-accepted
	a3 := dial("127.0.0.1") // over the per-source cap
	require.True(t, closedByServer(t, a3))
	require.EqualValues(t, 1, refused.Load())
	require.NoError(t, ln.AcceptHealthy())

	b1 := dial("127.0.0.2") // another source: within the total
	<-accepted
	require.Equal(t, 3, ln.Open())
	require.ErrorContains(t, ln.AcceptHealthy(), "connection cap")
	b2 := dial("127.0.0.2") // over the total
	require.True(t, closedByServer(t, b2))
	require.EqualValues(t, 2, refused.Load())
	_, _, _ = a1, a2, b1
}

func TestAbuseReleaseOnClose(t *testing.T) {
	t.Parallel()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ln := netlimit.Wrap(raw, netlimit.Options{Max: 1, PerSource: 1})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Connection", "close")
		_, _ = io.WriteString(w, "ok")
	}), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	// Sequential requests, each on a connection the server closes: the one place is reused.
	for range 5 {
		resp, err := http.Get("http://" + raw.Addr().String())
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.Equal(t, "ok", string(b))
		eventually(t, 2*time.Second, func() bool { return ln.Open() == 0 })
	}
}

func TestAPIMax(t *testing.T) {
	t.Parallel()
	require.Equal(t, 20000-512-512, netlimit.APIMax(20000))
	require.Equal(t, 64, netlimit.APIMax(1024))
	require.Equal(t, 1<<20, netlimit.APIMax(1<<40))
}

func TestRaiseFDLimit(t *testing.T) {
	t.Parallel()
	n, err := netlimit.RaiseFDLimit()
	require.NoError(t, err)
	require.Positive(t, n)
}
