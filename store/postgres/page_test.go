package postgres_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/migrations"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/postgres"
)

// What a page of large jobs costs the store, measured as the bytes Postgres sends it (everything it
// can hold comes over that wire): with data, about the byte budget; without, only metadata. Before
// the budget a page of 40 such jobs read every payload, 10 MiB.
func TestJobListReadsWithinByteBudget(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := testenv.NewDatabase(t)
	require.NoError(t, migrations.Up(ctx, dsn))
	proxied, received := countingProxy(t, dsn)
	st, err := postgres.New(ctx, postgres.Config{DSN: proxied, MaxConns: 1})
	require.NoError(t, err)
	t.Cleanup(st.Close)

	q, err := st.QueueCreate(ctx, store.QueueCreateParams{Name: "pages"})
	require.NoError(t, err)
	const n, size, budget = 40, 256 << 10, 1 << 20
	ps := make([]store.JobInsertParams, n)
	for i := range ps {
		payload := make([]byte, size)
		for k := range payload {
			payload[k] = byte(k*7 + i) // not compressible into nothing
		}
		ps[i] = store.JobInsertParams{Queue: q.Name, Type: "t", Payload: payload}
	}
	_, err = st.JobInsertMany(ctx, ps)
	require.NoError(t, err)

	read := func(p store.JobListParams) (int, int64) {
		before := received.Load()
		page, err := st.JobList(ctx, p)
		require.NoError(t, err)
		return len(page.Jobs), received.Load() - before
	}
	jobs, bytes := read(store.JobListParams{Queue: q.Name, Limit: n, WithData: true, MaxBytes: budget})
	t.Logf("with data: %d jobs, %d bytes from Postgres", jobs, bytes)
	require.Equal(t, budget/size-1, jobs, "cut by the budget (metadata takes some of it)")
	require.Less(t, bytes, int64(budget+64<<10), "the store reads about the budget, not the page's payloads")

	jobs, bytes = read(store.JobListParams{Queue: q.Name, Limit: n, MaxBytes: budget})
	t.Logf("without data: %d jobs, %d bytes from Postgres", jobs, bytes)
	require.Equal(t, n, jobs)
	require.Less(t, bytes, int64(64<<10), "no payload is read")
}

// countingProxy forwards TCP connections to dsn's server and counts the bytes the server sends.
// It returns dsn pointed at the proxy.
func countingProxy(t *testing.T, dsn string) (string, *atomic.Int64) {
	t.Helper()
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	target := u.Host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		received atomic.Int64
		wg       sync.WaitGroup
		mu       sync.Mutex
		conns    []net.Conn
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(s, c); _ = s.Close() })
			wg.Go(func() {
				_, _ = io.Copy(c, countingReader{s, &received})
				_ = c.Close()
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	u.Host = ln.Addr().String()
	return u.String(), &received
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}
