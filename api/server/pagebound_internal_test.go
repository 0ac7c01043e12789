package server

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
)

// TestPayloadPagesBounded: with a bound of 1, a second page with payloads waits for the first
// and gives up at its deadline; pages without payloads are never held back.
func TestPayloadPagesBounded(t *testing.T) {
	t.Parallel()
	release, entered := make(chan struct{}), make(chan struct{}, 4)
	next := func(context.Context, connect.AnyRequest) (connect.AnyResponse, error) {
		entered <- struct{}{}
		<-release
		return connect.NewResponse(&jqv1.ListJobsResponse{}), nil
	}
	b := newPageBound(1)
	h := b.interceptor()(next)
	withPayloads := connect.NewRequest(&jqv1.ListJobsRequest{IncludePayloads: true})

	first := make(chan error, 1)
	go func() { _, err := h(t.Context(), withPayloads); first <- err }()
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
	// The first page's turn lasts until its response is encoded.
	select {
	case b.sem <- struct{}{}:
		t.Fatal("the turn ended before the response was encoded")
	default:
	}
	var resp any
	b.pending.Range(func(k, _ any) bool { resp = k; return false })
	require.NotNil(t, resp)
	_, err = b.codec(jsonCodec{name: "json"}).Marshal(resp)
	require.NoError(t, err)
	b.sem <- struct{}{} // free again
}
