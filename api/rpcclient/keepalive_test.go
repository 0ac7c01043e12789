package rpcclient_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
	"github.com/jq-dev/jq/api/rpcclient"
)

// silentStream answers StreamJobs with one keepalive message and then nothing, like a server with no
// work for the worker.
type silentStream struct {
	jqv1connect.UnimplementedWorkerServiceHandler
}

func (silentStream) StreamJobs(ctx context.Context, _ *connect.Request[jqv1.StreamJobsRequest], s *connect.ServerStream[jqv1.StreamJobsResponse]) error {
	if err := s.Send(&jqv1.StreamJobsResponse{}); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// blackhole forwards TCP between a client and a server until cut, after which it drops every byte
// in both directions without closing anything: a partition, as the client sees it.
type blackhole struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
}

func (b *blackhole) serve() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", b.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		go b.pipe(c, s)
		go b.pipe(s, c)
	}
}

func (b *blackhole) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		b.mu.Lock()
		cut := b.cut
		b.mu.Unlock()
		if !cut {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
	}
}

// TestStreamNoticesPartition: a partitioned server is noticed by the client's HTTP/2 pings within
// PingAfter + PingTimeout (plus slack), not after TCP's retransmission timeout (minutes).
func TestStreamNoticesPartition(t *testing.T) {
	t.Parallel()
	srvLn, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	mux := http.NewServeMux()
	mux.Handle(jqv1connect.NewWorkerServiceHandler(silentStream{}))
	srv := &http.Server{Handler: mux, Protocols: p, ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(srvLn) }()
	defer func() { _ = srv.Close() }()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = ln.Close() }()
	bh := &blackhole{ln: ln, target: srvLn.Addr().String()}
	go bh.serve()

	const after, timeout = 200 * time.Millisecond, 300 * time.Millisecond
	cl, err := rpcclient.New(rpcclient.Options{Addr: ln.Addr().String(), PingAfter: after, PingTimeout: timeout})
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := cl.Workers.StreamJobs(ctx, connect.NewRequest(&jqv1.StreamJobsRequest{WorkerId: "w"}))
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	require.True(t, s.Receive(), "the opening keepalive: %v", s.Err())

	bh.mu.Lock()
	bh.cut = true
	bh.mu.Unlock()
	cutAt := time.Now()
	require.False(t, s.Receive(), "nothing arrives across the partition")
	noticed := time.Since(cutAt)
	require.Error(t, s.Err())
	require.NotErrorIs(t, s.Err(), io.EOF)
	require.Less(t, noticed, 10*(after+timeout), "noticed after %v: %v", noticed, s.Err())
	t.Logf("partition noticed after %v: %v", noticed.Round(time.Millisecond), s.Err())
}
