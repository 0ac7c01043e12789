package kafkastore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// EnsureTopics creates the missing topics with the configured retention, leaves existing ones alone,
// and a second call creates nothing. franz-go's client checks what the broker holds.
func TestEnsureTopics(t *testing.T) {
	t.Parallel()
	k, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "existing"))
	require.NoError(t, err)
	t.Cleanup(k.Close)
	s, err := New(Config{Brokers: k.ListenAddrs()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	created, err := s.EnsureTopics(ctx, []string{"jq.job-events", "existing"}, 48*time.Hour)
	require.NoError(t, err)
	require.Equal(t, []string{"jq.job-events"}, created)
	created, err = s.EnsureTopics(ctx, []string{"jq.job-events", "existing"}, 48*time.Hour)
	require.NoError(t, err)
	require.Empty(t, created, "nothing is created twice")

	cl, err := kgo.NewClient(kgo.SeedBrokers(k.ListenAddrs()...))
	require.NoError(t, err)
	defer cl.Close()
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, name := range []string{"jq.job-events", "existing"} {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType = kmsg.ConfigResourceTypeTopic
		r.ResourceName = name
		req.Resources = append(req.Resources, r)
	}
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	retention := map[string]string{}
	for _, r := range resp.Resources {
		require.Zero(t, r.ErrorCode, r.ResourceName)
		for _, c := range r.Configs {
			if c.Name == "retention.ms" && c.Value != nil {
				retention[r.ResourceName] = *c.Value
			}
		}
	}
	require.Equal(t, "172800000", retention["jq.job-events"], "created with retention_h")
	require.NotEqual(t, "172800000", retention["existing"], "an existing topic keeps its own")
}
