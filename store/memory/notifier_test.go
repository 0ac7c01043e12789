package memory_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/store/memory"
)

const waitFor = 10 * time.Second

// recorder is one Listen call under test: the names its callback got, and its result.
type recorder struct {
	mu       sync.Mutex
	names    []string
	cancel   context.CancelFunc
	done     chan error
	stopOnce sync.Once
}

// listen starts n.Listen with a callback that records each name after calling hook (nil: none);
// the listener is stopped when the test ends.
func listen(t *testing.T, n *memory.Notifier, hook func(string)) *recorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &recorder{cancel: cancel, done: make(chan error, 1)}
	go func() {
		r.done <- n.Listen(ctx, func(q string) {
			if hook != nil {
				hook(q)
			}
			r.mu.Lock()
			r.names = append(r.names, q)
			r.mu.Unlock()
		})
	}()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels the Listen call and waits for it to return nil.
func (r *recorder) stop(t *testing.T) {
	t.Helper()
	r.stopOnce.Do(func() {
		r.cancel()
		select {
		case err := <-r.done:
			require.NoError(t, err)
		case <-time.After(waitFor):
			t.Fatal("Listen did not return after its context ended")
		}
	})
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.names)
}

// waitListeners waits until n has want Listen calls registered.
func waitListeners(t *testing.T, n *memory.Notifier, want int) {
	t.Helper()
	testenv.Eventually(t, waitFor, func() error {
		if got := n.Listeners(); got != want {
			return fmt.Errorf("%d listeners, want %d", got, want)
		}
		return nil
	})
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestNotifierEveryListenerHears(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	n := memory.NewNotifier()
	a, b := listen(t, n, nil), listen(t, n, nil)
	waitListeners(t, n, 2)
	require.NoError(t, n.Notify(ctx, []string{"emails", "images"}))
	for _, r := range []*recorder{a, b} {
		testenv.Eventually(t, waitFor, func() error {
			if got := r.got(); !slices.Equal(got, []string{"emails", "images"}) {
				return fmt.Errorf("got %q", got)
			}
			return nil
		})
	}
}

func TestNotifierListenEndsWithContext(t *testing.T) {
	t.Parallel()
	n := memory.NewNotifier()
	r := listen(t, n, nil)
	waitListeners(t, n, 1)
	r.stop(t)
	require.Zero(t, n.Listeners(), "an ended Listen is unregistered")
	require.NoError(t, n.Notify(testCtx(t), []string{"q"}))
	require.Empty(t, r.got())
}

func TestNotifierNeverBlocks(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	n := memory.NewNotifier()
	require.NoError(t, n.Notify(ctx, []string{"nobody", "listens"}))

	// A listener stuck in its callback: its buffer fills, and the rest is dropped, not waited for.
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	r := listen(t, n, func(string) {
		once.Do(func() {
			close(entered)
			<-release
		})
	})
	waitListeners(t, n, 1)
	require.NoError(t, n.Notify(ctx, []string{"first"}))
	<-entered
	flood := make([]string, 2*memory.ListenBuffer)
	for i := range flood {
		flood[i] = fmt.Sprintf("q%d", i)
	}
	require.NoError(t, n.Notify(ctx, flood))
	close(release)

	want := append([]string{"first"}, flood[:memory.ListenBuffer]...)
	testenv.Eventually(t, waitFor, func() error {
		if got := r.got(); len(got) != len(want) {
			return fmt.Errorf("%d names, want %d", len(got), len(want))
		}
		return nil
	})
	r.stop(t)
	require.Equal(t, want, r.got(), "the buffered names, in order; nothing after")
}

func TestNotifierEndedContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n := memory.NewNotifier()
	require.ErrorIs(t, n.Notify(ctx, []string{"q"}), context.Canceled)
	require.NoError(t, n.Listen(ctx, func(string) {}), "Listen on an ended context returns nil at once")
	require.Error(t, n.Listen(testCtx(t), nil))
}
