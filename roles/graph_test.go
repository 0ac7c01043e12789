package roles

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/jq-dev/jq/config"
)

func names(rows []row) []component {
	var out []component
	for _, r := range rows {
		out = append(out, r.name)
	}
	return out
}

// The real table: each role's components in start order (they stop in reverse).
func TestRoleTableOrder(t *testing.T) {
	t.Parallel()
	server := []component{"tracing", "auth", "store", "dispatch", "health", "metrics", "migrate", "relay", "background", "engine", "schedules", "api", "console", "banner"}
	cfg, withScan, noMetrics := config.Default(), config.Default(), config.Default()
	withScan.Producer.ScanDir = "/in"
	noMetrics.Metrics.Enabled = false
	for _, tc := range []struct {
		role Name
		cfg  *config.Config
		want []component
	}{
		{Server, &cfg, server},
		{Server, &noMetrics, slices.DeleteFunc(slices.Clone(server), func(c component) bool { return c == "metrics" })},
		{Worker, &cfg, []component{"worker"}},
		{Producer, &cfg, []component{"producer"}}, // its own grammar asks for scan_dir
		{All, &cfg, append(slices.Clone(server), "worker")},
		{All, &withScan, append(slices.Clone(server), "worker", "producer")},
		{Admin, &cfg, nil},
	} {
		rows, err := plan(roleTable, tc.role, tc.cfg)
		require.NoError(t, err, tc.role)
		require.Equal(t, tc.want, names(rows), tc.role)
	}
}

func TestPlanOrdersByNeedsAndRefusesBadTables(t *testing.T) {
	t.Parallel()
	cfg := new(config.Config)
	rows, err := plan([]row{
		{role: Server, name: "c", needs: []component{"b"}},
		{role: Server, name: "a"},
		{role: Server, name: "b", needs: []component{"a"}},
		{role: Worker, name: "w", after: []component{"c", "gone"}},
	}, All, cfg)
	require.NoError(t, err)
	require.Equal(t, []component{"a", "b", "c", "w"}, names(rows))

	_, err = plan([]row{{role: Worker, name: "w", needs: []component{"api"}}, {role: Server, name: "api"}}, Worker, cfg)
	require.EqualError(t, err, "role table: w needs api, which --role=worker does not run")

	_, err = plan([]row{
		{role: Server, name: "a", needs: []component{"b"}},
		{role: Server, name: "b", after: []component{"a"}},
	}, Server, cfg)
	require.EqualError(t, err, "role table: a cycle among [a b]")
}

// recorder builds rows whose parts log what happens to them.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// row returns a component that runs until stopped (or returns runErr at once when given),
// and records build, run, stop and close.
func (r *recorder) row(role Name, name component, buildErr, runErr error, needs ...component) row {
	return row{role: role, name: name, needs: needs, build: func(context.Context, *process) (part, error) {
		r.add("build " + string(name))
		if buildErr != nil {
			return part{}, buildErr
		}
		return part{
			run: func(ctx context.Context) error {
				if runErr != nil {
					return runErr
				}
				<-ctx.Done()
				r.add("stop " + string(name))
				return ctx.Err()
			},
			close: func() { r.add("close " + string(name)) },
		}, nil
	}}
}

type graphRun struct {
	lc   *lifecycle
	done chan error
}

func startGraph(t *testing.T, ctx context.Context, table []row, role Name) graphRun {
	t.Helper()
	rows, err := plan(table, role, new(config.Config))
	require.NoError(t, err)
	g := graphRun{lc: &lifecycle{}, done: make(chan error, 1)}
	go func() { g.done <- runGraph(ctx, rows, &process{}, g.lc, zap.NewNop()) }()
	return g
}

func (g graphRun) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-g.done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the graph did not stop")
		return nil
	}
}

func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, not waiting for an event
	}
}

func TestRunGraphStartsInOrderAndStopsInReverse(t *testing.T) {
	t.Parallel()
	r := &recorder{}
	table := []row{r.row(Server, "b", nil, nil, "a"), r.row(Server, "a", nil, nil), r.row(Worker, "w", nil, nil)}
	ctx, cancel := context.WithCancel(context.Background())
	g := startGraph(t, ctx, table, All)
	eventually(t, g.lc.started.Load)
	require.False(t, g.lc.stopping.Load())
	cancel()
	require.NoError(t, g.wait(t))
	require.True(t, g.lc.stopping.Load())
	require.Equal(t, []string{"build a", "build b", "build w", "stop w", "close w", "stop b", "close b", "stop a", "close a"}, r.list())
}

func TestRunGraphBuildFailureStopsWhatStarted(t *testing.T) {
	t.Parallel()
	r := &recorder{}
	table := []row{r.row(Server, "a", nil, nil), r.row(Server, "b", errors.New("postgres: refused"), nil), r.row(Server, "c", nil, nil)}
	g := startGraph(t, context.Background(), table, Server)
	require.EqualError(t, g.wait(t), "start server: postgres: refused")
	require.False(t, g.lc.started.Load(), "never ready")
	require.Equal(t, []string{"build a", "build b", "stop a", "close a"}, r.list())
}

func TestRunGraphFailureStopsEveryComponent(t *testing.T) {
	t.Parallel()
	r := &recorder{}
	table := []row{r.row(Server, "a", nil, nil), r.row(Worker, "w", nil, errors.New("not allowed"))}
	g := startGraph(t, context.Background(), table, All)
	require.EqualError(t, g.wait(t), "worker: not allowed")
	require.Equal(t, []string{"build a", "build w", "close w", "stop a", "close a"}, r.list())
}

// A finite component that ends stops nothing; alone, its end is the process's.
func TestRunGraphFiniteComponent(t *testing.T) {
	t.Parallel()
	r := &recorder{}
	once := r.row(Producer, "p", nil, nil)
	once.finite = true
	once.build = func(context.Context, *process) (part, error) {
		return part{run: func(context.Context) error { r.add("scanned"); return nil }}, nil
	}
	g := startGraph(t, context.Background(), []row{once}, Producer)
	require.NoError(t, g.wait(t))

	ctx, cancel := context.WithCancel(context.Background())
	g = startGraph(t, ctx, []row{r.row(Server, "a", nil, nil), once}, All)
	eventually(t, func() bool { return slices.Equal(r.list(), []string{"scanned", "build a", "scanned"}) })
	select {
	case err := <-g.done:
		t.Fatalf("the graph stopped when the finite component ended: %v", err)
	default:
	}
	cancel()
	require.NoError(t, g.wait(t))
	require.Equal(t, []string{"scanned", "build a", "scanned", "stop a", "close a"}, r.list())
}

// A stop asked for while a component starts (SIGTERM during the migration) is a clean exit; a
// build that fails by itself is not.
func TestRunGraphStopDuringStart(t *testing.T) {
	t.Parallel()
	r := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	migrate := row{role: Server, name: "migrate", needs: []component{"a"}, build: func(ctx context.Context, _ *process) (part, error) {
		cancel()
		return part{}, fmt.Errorf("migrate: %w", ctx.Err())
	}}
	g := startGraph(t, ctx, []row{r.row(Server, "a", nil, nil), migrate}, Server)
	require.NoError(t, g.wait(t))
	require.Equal(t, []string{"build a", "stop a", "close a"}, r.list())
}
