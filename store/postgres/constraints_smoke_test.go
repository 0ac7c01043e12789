package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

func TestConstraintSmoke(t *testing.T) {
	st := privateStore(t)
	ctx := context.Background()
	_, err := st.QueueCreate(ctx, store.QueueCreateParams{Name: "cs"})
	require.NoError(t, err)
	_, err = st.ConstraintCreate(ctx, store.ConstraintCreateParams{Constraint: queue.Constraint{
		Name: "per-tenant", Match: queue.JobMatcher{Queue: "cs"}, Key: "{{.labels.tenant}}", Concurrency: 2}})
	require.NoError(t, err)
	var ps []store.JobInsertParams
	for i := range 30 {
		ps = append(ps, store.JobInsertParams{Queue: "cs", Type: "t", Labels: map[string]string{"tenant": []string{"a", "a", "a", "a", "a", "b"}[i%6]}})
	}
	_, err = st.JobInsertMany(ctx, ps)
	require.NoError(t, err)
	_, err = st.WorkerRegister(ctx, store.WorkerRegisterParams{ID: "w1", Queues: []string{"cs"}, Concurrency: 100})
	require.NoError(t, err)
	out, err := st.JobClaimConstrained(ctx, store.JobClaimParams{Queue: "cs", WorkerID: "w1", Limit: 10})
	require.NoError(t, err)
	got := map[string]int{}
	for _, j := range out.Jobs {
		got[j.Labels["tenant"]]++
	}
	fmt.Println(got, out.Throttled, out.Gen)
	require.Equal(t, map[string]int{"a": 2, "b": 2}, got)
	out, err = st.JobClaimConstrained(ctx, store.JobClaimParams{Queue: "cs", WorkerID: "w1", Limit: 10})
	require.NoError(t, err)
	require.Empty(t, out.Jobs)
	fmt.Println(out.Throttled)
	u, err := st.ConstraintUsage(ctx, store.ConstraintUsageParams{Name: "per-tenant", Top: 10})
	require.NoError(t, err)
	fmt.Printf("%+v\n", u)
}
