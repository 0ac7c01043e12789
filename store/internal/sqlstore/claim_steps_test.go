package sqlstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

// TestWeightedSteps: aged first, then each level's quota with a short level's rest carried to the
// next, then the rest of the batch; a step with nothing left to take is not run.
func TestWeightedSteps(t *testing.T) {
	t.Parallel()
	p := store.JobClaimParams{Limit: 10, MaxWait: time.Second,
		Levels: []queue.LevelQuota{{Priority: 9, Max: 4}, {Priority: 5, Max: 3}, {Priority: 0, Max: 3}}}
	took := map[int]int{9: 1, 5: 5, 0: 0} // what each level has due
	var steps []sqlstore.ClaimStep
	require.NoError(t, sqlstore.WeightedSteps(p, func(s sqlstore.ClaimStep) (int, error) {
		steps = append(steps, s)
		switch s.Kind {
		case sqlstore.ClaimAged:
			return 2, nil
		case sqlstore.ClaimLevel:
			return min(took[s.Priority], s.Limit), nil
		}
		return s.Limit, nil
	}))
	require.Equal(t, []sqlstore.ClaimStep{
		{Kind: sqlstore.ClaimAged, Limit: 10},
		{Kind: sqlstore.ClaimLevel, Priority: 9, Limit: 4},
		{Kind: sqlstore.ClaimLevel, Priority: 5, Limit: 6}, // its 3 and the 3 level 9 left
		{Kind: sqlstore.ClaimLevel, Priority: 0, Limit: 2}, // 10 - 2 aged - 1 - 5
		{Kind: sqlstore.ClaimRest, Limit: 2},
	}, steps)

	// A full batch runs no more steps.
	steps = nil
	require.NoError(t, sqlstore.WeightedSteps(store.JobClaimParams{Limit: 3, Levels: []queue.LevelQuota{{Priority: 1, Max: 3}}},
		func(s sqlstore.ClaimStep) (int, error) { steps = append(steps, s); return s.Limit, nil }))
	require.Equal(t, []sqlstore.ClaimStep{{Kind: sqlstore.ClaimLevel, Priority: 1, Limit: 3}}, steps)
}
