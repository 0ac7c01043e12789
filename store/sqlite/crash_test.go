package sqlite_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/sqlite"
)

// crashChildEnv names the database a child process of TestCrashLosesNothing writes to.
const crashChildEnv = "JQ_SQLITE_CRASH_CHILD_DB"

// TestCrashLosesNothing kills (SIGKILL) a process that is submitting jobs as fast as it can, from
// several goroutines, in the middle of its group commits, and then opens the database again: every
// job whose submit had returned — the child prints its id only then — is there, PENDING, with its
// submission event. The child is this test binary, run again.
func TestCrashLosesNothing(t *testing.T) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path)
		return
	}
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jq.db")
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestCrashLosesNothing$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		var accepted []string
		sc := bufio.NewScanner(out)
		for sc.Scan() && len(accepted) < 2000 {
			accepted = append(accepted, sc.Text())
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		for sc.Scan() { // what the child printed before it died was accepted too
			accepted = append(accepted, sc.Text())
		}
		_ = cmd.Wait()
		require.GreaterOrEqual(t, len(accepted), 2000, "round %d: the child stopped early", round)

		s := newPrivateStore(t, sqlite.Config{Path: path})
		ctx := context.Background()
		for _, id := range accepted {
			j, err := s.JobGet(ctx, id)
			require.NoError(t, err, "round %d: accepted job %s lost", round, id)
			require.Equal(t, "crash", j.Queue)
			evs, err := s.JobEvents(ctx, id)
			require.NoError(t, err)
			require.NotEmpty(t, evs, "round %d: job %s without its submission event", round, id)
		}
		t.Logf("round %d: %d accepted jobs, all there after kill -9", round, len(accepted))
		s.Close()
	}
}

// crashChild submits batches of jobs from 8 goroutines until it is killed, printing each job's id
// once its submit returned.
func crashChild(path string) {
	ctx := context.Background()
	s, err := sqlite.New(ctx, sqlite.Config{Path: path})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	if _, _, err := s.QueueEnsure(ctx, store.QueueCreateParams{Name: "crash"}); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				batch := make([]store.JobInsertParams, 1+g%4)
				for i := range batch {
					batch[i] = store.JobInsertParams{Queue: "crash", Type: "t", Payload: []byte(`{}`)}
				}
				res, err := s.JobInsertMany(ctx, batch)
				if err != nil {
					fmt.Fprintln(os.Stderr, "child:", err)
					os.Exit(2)
				}
				mu.Lock()
				for _, r := range res {
					fmt.Fprintln(w, r.Job.ID)
				}
				_ = w.Flush()
				mu.Unlock()
			}
		}()
	}
	wg.Wait() // never: the parent kills this process
}
