package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/test/internal/jqbin"
)

// lockedBuffer is a child's stderr, read while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// With Kafka on, `events tail` (--source auto) follows the events topic that the relay fills.
func TestAdminEventsTailKafkaE2E(t *testing.T) {
	t.Parallel()
	k, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "jq.job-events", "job.dead-lettered"))
	require.NoError(t, err)
	t.Cleanup(k.Close)
	broker := k.ListenAddrs()[0]
	c := newCluster(t)
	se := c.startServer("JQ_KAFKA_ENABLED=true", "JQ_KAFKA_BROKERS="+broker)
	a := adminCLI{t: t, addr: se.Addr()}

	cmd := exec.Command(jqbin.Path(t), "--role=admin", "--server-addr", a.addr, "events", "tail", "--queue", "default")
	cmd.Env = append(os.Environ(), "JQ_KAFKA_BROKERS="+broker)
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	testenv.Eventually(t, 30*time.Second, func() error {
		select {
		case err := <-done:
			t.Fatalf("events tail ended before following Kafka: %v: %s", err, stderr.String())
		default:
		}
		if !strings.Contains(stderr.String(), "following Kafka topic jq.job-events") {
			return fmt.Errorf("not following yet: %q", stderr.String())
		}
		return nil
	})

	c.startWorker(0, "w-kafka-tail", 4, "default")
	var ids []string
	for range 5 {
		ids = append(ids, a.submit("--payload", "{}"))
	}
	testenv.Eventually(t, 60*time.Second, func() error {
		out := stdout.String()
		for _, id := range ids {
			if !strings.Contains(out, id) || strings.Count(out, "RUNNING→DONE") < len(ids) {
				return fmt.Errorf("not every job's events yet:\n%s", out)
			}
		}
		return nil
	})
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	require.Equal(t, []string{"TIME", "JOB", "QUEUE", "FROM→TO", "REASON", "WORKER", "ATTEMPT"}, strings.Fields(lines[0]))
	require.Len(t, lines, 1+4*len(ids), "submitted, assigned, acked, completed: each once")
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	select {
	case err := <-done:
		require.NoError(t, err, "Ctrl-C is exit 0: %s", stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatal("events tail did not stop on Ctrl-C")
	}
}
