package apiserver_test

import (
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
)

// TestListWorkersPages: ListWorkers answers pages of page_size (default 500, at most 1000) with a
// token for the next; a bad size or token is INVALID_ARGUMENT.
func TestListWorkersPages(t *testing.T) {
	b := setup(t)
	for range 3 {
		_, err := b.cl.Workers.RegisterWorker(b.ctx, connect.NewRequest(&jqv1.RegisterWorkerRequest{
			WorkerId: "page-" + uuid.NewString()[:8], Hostname: "h", Concurrency: 1, Queues: []string{"default"}}))
		require.NoError(t, err)
	}
	seen := map[string]bool{}
	pages := 0
	for token := ""; ; pages++ {
		res, err := b.cl.Workers.ListWorkers(b.ctx, connect.NewRequest(&jqv1.ListWorkersRequest{PageSize: 1, PageToken: token}))
		require.NoError(t, err)
		require.LessOrEqual(t, len(res.Msg.GetWorkers()), 1)
		for _, w := range res.Msg.GetWorkers() {
			require.False(t, seen[w.GetId()], "listed twice: %s", w.GetId())
			seen[w.GetId()] = true
		}
		if token = res.Msg.GetNextPageToken(); token == "" {
			break
		}
	}
	require.GreaterOrEqual(t, pages, 2)
	require.GreaterOrEqual(t, len(seen), 3)
	for _, req := range []*jqv1.ListWorkersRequest{{PageSize: -1}, {PageSize: 1001}, {PageToken: "!!"}} {
		_, err := b.cl.Workers.ListWorkers(b.ctx, connect.NewRequest(req))
		require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", req)
	}
}
