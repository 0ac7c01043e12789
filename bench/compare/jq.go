package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/jq-dev/jq/client"
)

// jqSystem is jq built as a binary (-jq): either a `--role=server` process and a separate
// `--role=worker` process (jq-remote), or one `--role=all` process (jq-all). Jobs go in through
// the public client package (SubmitMany, Submit); the built-in `noop` handler runs them.
type jqSystem struct {
	cfg      *config
	allInOne bool
	// embedded: jq --role=all on its embedded store (store.driver sqlite) in a fresh data directory
	// of each run: no Postgres, no Redis. Its figures are read from the SQLite file (read-only).
	embedded bool
	dataDir  string
	lite     *sql.DB
	seq      int
	profiles int // profiles taken, for their file names

	prefix string // Redis key prefix of this run, so nothing of an earlier run is read
	pool   *pgxpool.Pool
	client *client.Client
	procs  []*process
}

func newJQRemote(cfg *config) *jqSystem { return &jqSystem{cfg: cfg} }
func newJQAll(cfg *config) *jqSystem    { return &jqSystem{cfg: cfg, allInOne: true} }
func newJQEmbedded(cfg *config) *jqSystem {
	return &jqSystem{cfg: cfg, allInOne: true, embedded: true}
}

func (j *jqSystem) Name() string {
	if j.embedded {
		return "jq-embedded"
	}
	if j.allInOne {
		return "jq-all"
	}
	return "jq-remote"
}

func (j *jqSystem) UsesPostgres() bool { return !j.embedded }

func (j *jqSystem) Processes() map[string]int {
	m := make(map[string]int, len(j.procs))
	for _, p := range j.procs {
		m[p.name] = p.pid()
	}
	return m
}

// ports, from -port-base: API, server health, server metrics, worker health, worker metrics.
func (j *jqSystem) port(i int) int { return j.cfg.portBase + i }

const (
	portGRPC = iota
	portHealth
	portMetrics
	portWorkerHealth
	portWorkerMetrics
)

func (j *jqSystem) env() []string {
	if j.embedded {
		return []string{
			"JQ_STORE_DRIVER=sqlite",
			"JQ_STORE_DATA_DIR=" + j.dataDir,
			"JQ_LOGGING_LEVEL=warn",
			"JQ_GRPC_HOST=127.0.0.1",
			"JQ_UI_ENABLED=false",
		}
	}
	return []string{
		"JQ_DB_URL=" + databaseURL(j.cfg.pgBase, j.cfg.jqDB),
		"JQ_REDIS_ADDR=" + j.cfg.redisAddr,
		"JQ_REDIS_KEY_PREFIX=" + j.prefix,
		"JQ_LOGGING_LEVEL=warn",
		"JQ_GRPC_HOST=127.0.0.1", // loopback: no credentials needed
		"JQ_UI_ENABLED=false",
		"JQ_METRICS_PPROF=" + strconv.FormatBool(j.cfg.profileDir != ""),
	}
}

func (j *jqSystem) Prepare(ctx context.Context) error {
	if j.embedded {
		d, err := os.MkdirTemp(j.cfg.logDir, "jq-embedded-")
		if err != nil {
			return err
		}
		j.dataDir = d
		j.client, err = client.New(client.Options{Addr: "127.0.0.1:" + strconv.Itoa(j.port(portGRPC))})
		return err
	}
	if err := freshDatabase(ctx, j.cfg.pgBase, j.cfg.jqDB); err != nil {
		return err
	}
	j.seq++
	j.prefix = fmt.Sprintf("cmp%d-%d-%s:", os.Getpid(), j.seq, j.Name())
	pc, err := pgxpool.ParseConfig(databaseURL(j.cfg.pgBase, j.cfg.jqDB))
	if err != nil {
		return err
	}
	pc.MaxConns = 2 // only this program's probes; the server has its own pool
	j.pool, err = pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return fmt.Errorf("%s: pool: %w", j.Name(), err)
	}
	j.client, err = client.New(client.Options{Addr: "127.0.0.1:" + strconv.Itoa(j.port(portGRPC))})
	return err
}

func (j *jqSystem) serverArgs(role string) []string {
	return []string{"--role=" + role,
		"--grpc-port", strconv.Itoa(j.port(portGRPC)),
		"--health-port", strconv.Itoa(j.port(portHealth)),
		"--metrics-port", strconv.Itoa(j.port(portMetrics))}
}

// startAll starts `jq --role=all` whose worker serves queues: the idle phase gives it a queue no job
// is submitted to, so the process is the same kind throughout and only its worker is kept idle.
func (j *jqSystem) startAll(ctx context.Context, queues string) error {
	args := append(j.serverArgs("all"),
		"--worker-health-port", strconv.Itoa(j.port(portWorkerHealth)),
		"--worker-metrics-port", strconv.Itoa(j.port(portWorkerMetrics)),
		"--concurrency", strconv.Itoa(j.cfg.concurrency), "--queues", queues)
	p, err := startProcess("jq-all", j.cfg.jqBin, j.cfg.logDir, j.env(), args)
	if err != nil {
		return err
	}
	j.procs = append(j.procs, p)
	if err := p.waitReady(ctx, j.port(portHealth), 30*time.Second); err != nil {
		return err
	}
	return p.waitReady(ctx, j.port(portWorkerHealth), 30*time.Second)
}

func (j *jqSystem) StartIdle(ctx context.Context) error {
	if j.allInOne {
		if err := j.startAll(ctx, "cmp_idle"); err != nil {
			return err
		}
		return j.createConstraint(ctx)
	}
	p, err := startProcess("jq-server", j.cfg.jqBin, j.cfg.logDir, j.env(), j.serverArgs("server"))
	if err != nil {
		return err
	}
	j.procs = append(j.procs, p)
	if err := p.waitReady(ctx, j.port(portHealth), 30*time.Second); err != nil {
		return err
	}
	return j.createConstraint(ctx)
}

// createConstraint runs `jq constraint create` with -jq-constraint's arguments, once per run (the
// constraint is kept in the run's database, which the next run creates afresh).
func (j *jqSystem) createConstraint(ctx context.Context) error {
	if j.cfg.jqConstraint == "" {
		return nil
	}
	args := append([]string{"--role=admin", "--server-addr", "127.0.0.1:" + strconv.Itoa(j.port(portGRPC)),
		"constraint", "create"}, strings.Fields(j.cfg.jqConstraint)...)
	out, err := exec.CommandContext(ctx, j.cfg.jqBin, args...).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "already exists") {
		return fmt.Errorf("%s: jq constraint create: %v: %s", j.Name(), err, out)
	}
	return nil
}

// StartWorkers: jq-remote starts the worker process next to the server; jq-all stops its idle
// process (the jobs stay in Postgres and Redis) and starts it again with its worker on "default".
func (j *jqSystem) StartWorkers(ctx context.Context) error {
	if j.allInOne {
		if err := j.stopProcs(); err != nil {
			return err
		}
		return j.startAll(ctx, "default")
	}
	p, err := startProcess("jq-worker", j.cfg.jqBin, j.cfg.logDir, j.env(), []string{"--role=worker",
		"--server-addr", "127.0.0.1:" + strconv.Itoa(j.port(portGRPC)),
		"--concurrency", strconv.Itoa(j.cfg.concurrency),
		"--health-port", strconv.Itoa(j.port(portWorkerHealth)),
		"--metrics-port", strconv.Itoa(j.port(portWorkerMetrics))})
	if err != nil {
		return err
	}
	j.procs = append(j.procs, p)
	return p.waitReady(ctx, j.port(portWorkerHealth), 30*time.Second)
}

var jqJob = client.Job{Queue: "default", Type: "noop", Payload: []byte(pad16)}

func (j *jqSystem) BulkInsert(ctx context.Context, n int) error {
	return inParallel(ctx, n, j.cfg.batchSize, j.cfg.batchInserters, func(ctx context.Context, k int) error {
		_, err := j.client.SubmitMany(ctx, slices.Repeat([]client.Job{jqJob}, k))
		return err
	})
}

func (j *jqSystem) InsertOne(ctx context.Context) error {
	_, err := j.client.Submit(ctx, jqJob)
	return err
}

func (j *jqSystem) Completed(ctx context.Context) (int, error) {
	if j.embedded {
		return j.liteInt(ctx, `SELECT count(*) FROM jobs WHERE state = 'DONE'`)
	}
	return queryInt(ctx, j.pool, `SELECT count(*) FROM jobs WHERE state = 'DONE'`)
}

func (j *jqSystem) Unfinished(ctx context.Context) (int, error) {
	if j.embedded {
		return j.liteInt(ctx, `SELECT count(*) FROM jobs WHERE state IN ('PENDING', 'ASSIGNED', 'RUNNING')`)
	}
	return queryInt(ctx, j.pool, `SELECT count(*) FROM jobs WHERE state IN ('PENDING', 'ASSIGNED', 'RUNNING')`)
}

// Timings reads jq's own stamps, all the server's clock: started_at − created_at, completed_at.
func (j *jqSystem) Timings(ctx context.Context, from, to time.Time) (timings, error) {
	if j.embedded {
		return j.liteTimings(ctx, from, to)
	}
	return pgTimings(ctx, j.pool, `SELECT started_at, completed_at, created_at FROM jobs WHERE state = 'DONE'`, from, to)
}

func (j *jqSystem) stopProcs() error {
	var first error
	// Reverse start order: the worker before the server it talks to.
	for i := len(j.procs) - 1; i >= 0; i-- {
		if err := j.procs[i].stop(30 * time.Second); err != nil && first == nil {
			first = err
		}
	}
	j.procs = nil
	return first
}

func (j *jqSystem) Stop(ctx context.Context) error {
	err := j.stopProcs()
	if j.client != nil {
		j.client.Close()
		j.client = nil
	}
	if j.pool != nil {
		j.pool.Close()
		j.pool = nil
	}
	if j.lite != nil {
		_ = j.lite.Close()
		j.lite = nil
	}
	if j.dataDir != "" {
		_ = os.RemoveAll(j.dataDir)
		j.dataDir = ""
	}
	if j.prefix != "" {
		if derr := deleteKeys(ctx, j.cfg.redisAddr, j.prefix); derr != nil && err == nil {
			err = derr
		}
	}
	return err
}

// deleteKeys removes this run's keys from the shared Redis (DB 0, where jq runs): by prefix, never
// FLUSHDB.
func deleteKeys(ctx context.Context, addr, prefix string) error {
	rc := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer rc.Close()
	iter := rc.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 1000 {
			if err := rc.Unlink(ctx, batch...).Err(); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if len(batch) > 0 {
		return rc.Unlink(ctx, batch...).Err()
	}
	return nil
}

// profiler is a system that can profile its server process over part of a workload.
type profiler interface {
	profile(ctx context.Context, d time.Duration, dir, workload string)
}

// profile writes a CPU profile of the server process (jq --role=server, or the one --role=all
// process) over d to dir; a failure is reported on stderr and leaves the run alone.
func (j *jqSystem) profile(ctx context.Context, d time.Duration, dir, workload string) {
	j.profiles++
	path := filepath.Join(dir, fmt.Sprintf("%s-%s-run%d.pprof", j.Name(), workload, j.profiles))
	url := fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=%d", j.port(portMetrics), max(int(d.Seconds()), 1))
	err := os.MkdirAll(dir, 0o755)
	var req *http.Request
	if err == nil {
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	}
	if err == nil {
		var resp *http.Response
		if resp, err = http.DefaultClient.Do(req); err == nil {
			defer resp.Body.Close()
			var f *os.File
			if f, err = os.Create(path); err == nil {
				_, err = io.Copy(f, resp.Body)
				err = errors.Join(err, f.Close())
			}
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "compare: profile %s: %v\n", path, err)
	}
}
