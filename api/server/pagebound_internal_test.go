package apiserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
)

// TestPayloadPagesBounded: with a budget of one page, a second page with payloads waits for the
// first and gives up at its deadline; pages without payloads are never held back; a page keeps
// the bytes its jobs carry until its request ends (its response written), and gives back the
// rest when its handler returns.
func TestPayloadPagesBounded(t *testing.T) {
	t.Parallel()
	const page = 1000
	release, entered := make(chan struct{}), make(chan struct{}, 4)
	next := func(context.Context, connect.AnyRequest) (connect.AnyResponse, error) {
		entered <- struct{}{}
		<-release
		return connect.NewResponse(&jqv1.ListJobsResponse{Jobs: []*jqv1.Job{
			{Payload: make([]byte, 300)}, {Result: &jqv1.JobResult{Data: make([]byte, 100)}}}}), nil
	}
	b := newPageBound(page, page)
	h := b.interceptor()(next)
	withPayloads := connect.NewRequest(&jqv1.ListJobsRequest{IncludePayloads: true})

	firstCtx, endFirst := context.WithCancel(t.Context())
	first := make(chan error, 1)
	go func() { _, err := h(firstCtx, withPayloads); first <- err }()
	<-entered
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := h(ctx, connect.NewRequest(&jqv1.PeekQueueRequest{IncludePayloads: true}))
	require.ErrorIs(t, err, context.DeadlineExceeded, "the second page waited for the first")
	require.Equal(t, connect.CodeDeadlineExceeded, connect.CodeOf(toConnect(zap.NewNop(), "/test", err)))

	plain := make(chan error, 1)
	go func() { _, err := h(t.Context(), connect.NewRequest(&jqv1.ListJobsRequest{})); plain <- err }()
	<-entered // a page without payloads runs beside the held one
	close(release)
	require.NoError(t, <-plain)
	require.NoError(t, <-first)
	// The first page keeps its 400 bytes until its request ends.
	require.Equal(t, int64(400), held(b))
	short, cancelShort := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancelShort()
	require.ErrorIs(t, b.sem.Acquire(short, page), context.DeadlineExceeded)
	endFirst()
	require.NoError(t, b.sem.Acquire(t.Context(), page), "the request's end gives the rest back")
	b.sem.Release(page)
	require.Zero(t, held(b))
}

// TestPayloadPageReleasedAtRequestEnd: a page keeps its share until ServeHTTP returns, even when
// its context is never cancelled (an in-process caller's), and gets a write deadline.
func TestPayloadPageReleasedAtRequestEnd(t *testing.T) {
	t.Parallel()
	next := func(context.Context, connect.AnyRequest) (connect.AnyResponse, error) {
		return connect.NewResponse(&jqv1.ListJobsResponse{Jobs: []*jqv1.Job{{Payload: make([]byte, 400)}}}), nil
	}
	b := newPageBound(1000, 1000)
	h := b.interceptor()(next)
	served := false
	srv := withRequestEnd(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		_, err := h(context.WithoutCancel(r.Context()), connect.NewRequest(&jqv1.ListJobsRequest{IncludePayloads: true}))
		require.NoError(t, err)
		require.Equal(t, int64(400), held(b), "kept while the response is written")
		served = true
	}))
	srv.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/jq.v1.JobService/ListJobs", nil))
	require.True(t, served)
	require.Zero(t, held(b), "given back when ServeHTTP returned")
}

// held is the units of b's budget taken now, exactly: the largest amount that can still be taken is
// the rest (no waiter may be queued when it is asked).
func held(b *pageBound) int64 {
	for h := int64(0); h <= b.size; h++ {
		if b.sem.TryAcquire(b.size - h) {
			b.sem.Release(b.size - h)
			return h
		}
	}
	return -1
}
