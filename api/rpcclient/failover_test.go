package rpcclient

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSplitAddrs(t *testing.T) {
	t.Parallel()
	got, err := splitAddrs(" a:1, b:2 ,")
	require.NoError(t, err)
	require.Equal(t, []string{"a:1", "b:2"}, got)
	got, err = splitAddrs("https://jq.example:443")
	require.NoError(t, err)
	require.Equal(t, []string{"https://jq.example:443"}, got, "a URL stands alone")
	for _, bad := range []string{"", " , ", "a:1,http://b:2", "a:1,b"} {
		_, err := splitAddrs(bad)
		require.Error(t, err, bad)
	}
}

// The failover dialer skips a server that refuses, sticks to the one that answered, and reports
// every error when none does.
func TestFailoverDial(t *testing.T) {
	t.Parallel()
	up, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = up.Close() }()
	down, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	downAddr := down.Addr().String()
	require.NoError(t, down.Close())

	f := &failover{addrs: []string{downAddr, up.Addr().String()}}
	ctx := context.Background()
	for range 2 {
		conn, addr, err := f.dialAny(ctx, "tcp")
		require.NoError(t, err)
		require.Equal(t, up.Addr().String(), addr)
		_ = conn.Close()
	}
	require.Equal(t, 1, f.last, "sticks to the server that answered")

	require.NoError(t, up.Close())
	_, _, err = f.dialAny(ctx, "tcp")
	require.Error(t, err)
	require.ErrorContains(t, err, downAddr)
}
