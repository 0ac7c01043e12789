package apiserver_test

import (
	"bytes"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/server"
	"github.com/jq-dev/jq/store"
)

// Pages of large jobs: without include_payloads they carry no payload or result; with it each
// response stays within the page byte budget, and the pages together hold every job whole.
func TestListJobsPagesBoundedByBytes(t *testing.T) {
	b := setup(t)
	const n, size, budget = 20, 100 << 10, 256 << 10
	b.cl = serve(t, apiserver.Options{Store: testStore, Log: zaptest.NewLogger(t), Limits: apiserver.Limits{MaxPageBytes: budget}})
	w := b.register(1)
	result := []byte(`{"ok":true}`)
	done := b.finish(b.lease(w, b.insert(store.JobInsertParams{KeepResult: true, Payload: []byte("small")}), true), true, result)
	payloads := map[string][]byte{done.ID: []byte("small")}
	for i := range n {
		p := bytes.Repeat([]byte{byte('a' + i)}, size)
		payloads[b.insert(store.JobInsertParams{Payload: p}).ID] = p
	}

	list := func(req *jqv1.ListJobsRequest) *jqv1.ListJobsResponse {
		t.Helper()
		resp, err := b.cl.Jobs.ListJobs(b.ctx, connect.NewRequest(req))
		require.NoError(t, err)
		return resp.Msg
	}

	lean := list(&jqv1.ListJobsRequest{Queue: b.queue, PageSize: 1000})
	require.Len(t, lean.GetJobs(), n+1)
	require.Empty(t, lean.GetNextPageToken())
	for _, j := range lean.GetJobs() {
		require.Empty(t, j.GetPayload())
		require.Nil(t, j.GetResult())
	}
	t.Logf("%d jobs without payloads: %d bytes", n+1, proto.Size(lean))

	req := &jqv1.ListJobsRequest{Queue: b.queue, PageSize: 1000, IncludePayloads: true}
	got := map[string][]byte{}
	pages := 0
	for {
		page := list(req)
		pages++
		require.LessOrEqual(t, proto.Size(page), budget, "page %d", pages)
		require.NotEmpty(t, page.GetJobs())
		for _, j := range page.GetJobs() {
			require.NotContains(t, got, j.GetId(), "a job on two pages")
			got[j.GetId()] = j.GetPayload()
			if j.GetId() == done.ID {
				require.Equal(t, result, j.GetResult().GetData())
			}
		}
		if page.GetNextPageToken() == "" {
			break
		}
		req.PageToken = page.GetNextPageToken()
	}
	require.Equal(t, payloads, got)
	require.Greater(t, pages, n*size/budget, "cut by bytes")
	t.Logf("%d jobs with payloads: %d pages of at most %d bytes", n+1, pages, budget)
}

func TestPeekQueueBoundedByBytes(t *testing.T) {
	b := setup(t)
	const n, size, budget = 6, 100 << 10, 256 << 10
	b.cl = serve(t, apiserver.Options{Store: testStore, Log: zaptest.NewLogger(t), Limits: apiserver.Limits{MaxPageBytes: budget}})
	for range n {
		b.insert(store.JobInsertParams{Payload: bytes.Repeat([]byte{'x'}, size)})
	}
	peek := func(include bool) *jqv1.PeekQueueResponse {
		t.Helper()
		resp, err := b.cl.Admin.PeekQueue(b.ctx, connect.NewRequest(&jqv1.PeekQueueRequest{Queue: b.queue, Limit: 100, IncludePayloads: include}))
		require.NoError(t, err)
		return resp.Msg
	}
	full := peek(true)
	require.True(t, full.GetTruncated())
	require.Len(t, full.GetJobs(), 2)
	require.LessOrEqual(t, proto.Size(full), budget)
	for _, j := range full.GetJobs() {
		require.Len(t, j.GetPayload(), size)
	}
	lean := peek(false)
	require.False(t, lean.GetTruncated())
	require.Len(t, lean.GetJobs(), n)
	for _, j := range lean.GetJobs() {
		require.Empty(t, j.GetPayload())
	}
}
