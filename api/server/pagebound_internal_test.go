package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

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
	require.Equal(t, connect.CodeDeadlineExceeded, codeOf(err))

	plain := make(chan error, 1)
	go func() { _, err := h(t.Context(), connect.NewRequest(&jqv1.ListJobsRequest{})); plain <- err }()
	<-entered // a page without payloads runs beside the held one
	close(release)
	require.NoError(t, <-plain)
	require.NoError(t, <-first)
	// The first page keeps its 400 bytes until its request ends.
	require.Equal(t, int64(400), b.sem.held())
	short, cancelShort := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancelShort()
	require.ErrorIs(t, b.sem.acquire(short, page), context.DeadlineExceeded)
	endFirst()
	require.NoError(t, b.sem.acquire(t.Context(), page), "the request's end gives the rest back")
	b.sem.release(page)
	require.Zero(t, b.sem.held())
}

// TestWeightedFirstComeFirstServed: a large waiter is not overtaken by smaller ones behind it,
// and one that gives up lets those behind it in.
func TestWeightedFirstComeFirstServed(t *testing.T) {
	t.Parallel()
	s := newWeighted(10)
	require.NoError(t, s.acquire(t.Context(), 6))
	bigCtx, giveUp := context.WithCancel(t.Context())
	big := make(chan error, 1)
	go func() { big <- s.acquire(bigCtx, 10) }()
	require.Eventually(t, func() bool { return s.waiting() == 1 }, 10*time.Second, time.Millisecond)
	small := make(chan error, 1)
	go func() { small <- s.acquire(t.Context(), 2) }()
	require.Eventually(t, func() bool { return s.waiting() == 2 }, 10*time.Second, time.Millisecond)
	select {
	case err := <-small:
		t.Fatalf("a small acquire overtook the large one waiting before it (%v)", err)
	default:
	}
	giveUp()
	require.ErrorIs(t, <-big, context.Canceled)
	require.NoError(t, <-small, "the waiter behind the one that gave up got in")
	require.Equal(t, int64(8), s.held())
	s.release(8)
	require.Zero(t, s.held())
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
		require.Equal(t, int64(400), b.sem.held(), "kept while the response is written")
		served = true
	}))
	srv.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/jq.v1.JobService/ListJobs", nil))
	require.True(t, served)
	require.Zero(t, b.sem.held(), "given back when ServeHTTP returned")
}
