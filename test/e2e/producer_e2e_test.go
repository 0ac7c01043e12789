package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/api/auth"
	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/test/internal/jqbin"
)

// producerRig is a jq server and what its producers need.
type producerRig struct {
	t      *testing.T
	dsn    string
	env    []string // for producers: the server's address, Redis and its key prefix
	server *jqbin.Process
}

func newProducerRig(t *testing.T) *producerRig {
	t.Helper()
	_, prefix := testenv.NewRedis(t)
	dsn := testenv.NewDatabase(t)
	se := jqbin.NewServerEnv(t, dsn)
	srv := jqbin.Start(t, append(se.Env, "JQ_REDIS_KEY_PREFIX="+prefix), "--role=server")
	srv.WaitLog(t, "server started")
	return &producerRig{t: t, dsn: dsn, server: srv, env: []string{
		"JQ_PRODUCER_SERVER_ADDR=" + se.Addr(),
		"JQ_REDIS_ADDR=" + testenv.RedisAddr(),
		"JQ_REDIS_KEY_PREFIX=" + prefix,
		"JQ_LOGGING_LEVEL=info",
	}}
}

// produce runs `jq --role=producer --once` on dir to its end and returns its JSON log lines.
// asNobody runs it as user nobody (uid 65534), for whom a file of mode 000 is unreadable.
func (r *producerRig) produce(dir string, asNobody bool, extra ...string) []map[string]any {
	r.t.Helper()
	p := r.start(dir, asNobody, append(extra, "JQ_PRODUCER_ONCE=true")...)
	require.Zero(r.t, p.WaitExit(r.t, 2*time.Minute), "producer output:\n%v", p.Output())
	return producerLines(p)
}

func (r *producerRig) start(dir string, asNobody bool, extra ...string) *jqbin.Process {
	r.t.Helper()
	env := append(append([]string{"JQ_PRODUCER_SCAN_DIR=" + dir}, r.env...), extra...)
	var setup func(*exec.Cmd)
	if asNobody {
		setup = func(c *exec.Cmd) {
			c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		}
	}
	return jqbin.StartWith(r.t, setup, env, "--role=producer")
}

// producerLines are a producer's JSON log lines (checked for shape by jsonLines elsewhere).
func producerLines(p *jqbin.Process) []map[string]any {
	var out []map[string]any
	for _, l := range p.Output() {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

func withMessage(lines []map[string]any, msg string) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if l["message"] == msg {
			out = append(out, l)
		}
	}
	return out
}

// jobs returns path → priority of the jobs in the queue, and how many jobs there are.
func (r *producerRig) jobs(ctx context.Context) (map[string]int, int) {
	r.t.Helper()
	conn, err := pgx.Connect(ctx, r.dsn)
	require.NoError(r.t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT convert_from(payload, 'UTF8')::jsonb->>'path', priority FROM jobs WHERE type = 'file'`)
	require.NoError(r.t, err)
	got := map[string]int{}
	n := 0
	for rows.Next() {
		var path string
		var prio int
		require.NoError(r.t, rows.Scan(&path, &prio))
		got[path] = prio
		n++
	}
	require.NoError(r.t, rows.Err())
	return got, n
}

func mkTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

// openTree makes root and its parents enterable by user nobody, and the test binary runnable.
func openTree(t *testing.T, root string) {
	t.Helper()
	for d := root; d != "/" && d != "."; d = filepath.Dir(d) {
		if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o005 != 0o005 {
			require.NoError(t, os.Chmod(d, st.Mode().Perm()|0o005))
		}
	}
	require.NoError(t, os.Chmod(filepath.Dir(jqbin.Path(t)), 0o755))
}

// TestProducerE2E: `jq --role=producer --once` on a tree with nested directories, globs,
// priorities by extension and an unreadable file submits exactly the right jobs; a second run
// submits nothing; a modified file is submitted again; two producers at once make one job per file.
func TestProducerE2E(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := newProducerRig(t)
	root := filepath.Join(t.TempDir(), "in")
	mkTree(t, root, map[string]string{
		"docs/report.PDF":          "pdf",
		"docs/notes.txt":           "notes",
		"deep/a/b/c/data.zip":      "zip",
		"deep/a/b/c/table.csv":     "csv",
		"tmp/junk.tmp":             "excluded by the default exclude globs",
		".DS_Store":                "excluded too",
		"node_modules/lib/x.js":    "an excluded directory",
		"unreadable/secret.txt":    "mode 000",
		"deep/a/b/c/.hidden.pdf":   "hidden files are files",
		"docs/sub/empty-file.docx": "",
	})
	openTree(t, root)
	secret := filepath.Join(root, "unreadable", "secret.txt")
	require.NoError(t, os.Chmod(secret, 0))
	want := map[string]int{
		"docs/report.PDF": 7, "docs/notes.txt": 0, "deep/a/b/c/data.zip": 7, "deep/a/b/c/table.csv": 0,
		"deep/a/b/c/.hidden.pdf": 7, "docs/sub/empty-file.docx": 7,
	}
	abs := func(m map[string]int) map[string]int {
		out := map[string]int{}
		for rel, p := range m {
			out[filepath.Join(root, filepath.FromSlash(rel))] = p
		}
		return out
	}
	exclude := "JQ_PRODUCER_EXCLUDE_GLOBS=**/*.tmp,**/.DS_Store,**/node_modules"

	lines := r.produce(root, true, exclude)
	got, n := r.jobs(ctx)
	require.Equal(t, abs(want), got)
	require.Equal(t, len(want), n)
	warned := withMessage(lines, "skipping a file that cannot be read")
	require.Len(t, warned, 1, "one warning for the unreadable file")
	require.Equal(t, secret, warned[0]["path"])
	done := withMessage(lines, "scan pass done")
	require.Len(t, done, 1)
	require.EqualValues(t, len(want), done[0]["new_jobs"])

	// Again: every version is known to the server; nothing new.
	lines = r.produce(root, true, exclude)
	_, n = r.jobs(ctx)
	require.Equal(t, len(want), n, "a second run submits nothing")
	require.EqualValues(t, 0, withMessage(lines, "scan pass done")[0]["new_jobs"])
	require.EqualValues(t, len(want), withMessage(lines, "scan pass done")[0]["already_submitted"])

	// A modified file is a new version.
	notes := filepath.Join(root, "docs", "notes.txt")
	require.NoError(t, os.WriteFile(notes, []byte("notes, longer now"), 0o644))
	lines = r.produce(root, true, exclude)
	_, n = r.jobs(ctx)
	require.Equal(t, len(want)+1, n)
	require.EqualValues(t, 1, withMessage(lines, "scan pass done")[0]["new_jobs"])

	// Two producers on one directory at once: one job per file version.
	both := filepath.Join(t.TempDir(), "both")
	files := map[string]string{}
	for i := range 200 {
		files[fmt.Sprintf("d%d/f%03d.txt", i%7, i)] = strconv.Itoa(i)
	}
	mkTree(t, both, files)
	p1 := r.start(both, false, "JQ_PRODUCER_ONCE=true", "JQ_PRODUCER_BATCH_SIZE=7")
	p2 := r.start(both, false, "JQ_PRODUCER_ONCE=true", "JQ_PRODUCER_BATCH_SIZE=7")
	require.Zero(t, p1.WaitExit(t, time.Minute))
	require.Zero(t, p2.WaitExit(t, time.Minute))
	got, n = r.jobs(ctx)
	require.Equal(t, len(want)+1+len(files), n, "one job per file version")
	for rel := range files {
		require.Contains(t, got, filepath.Join(both, filepath.FromSlash(rel)))
	}
	created := 0
	for _, p := range []*jqbin.Process{p1, p2} {
		created += int(withMessage(producerLines(p), "scan pass done")[0]["new_jobs"].(float64))
	}
	require.Equal(t, len(files), created, "the two producers' new jobs add up to the files")
}

// TestProducerSharedRateLimit: two producers sharing the Redis limit submit at the limit together,
// not each; SIGTERM in watch mode finishes the batch in flight, and the next run submits exactly the
// rest: nothing lost, nothing twice. Not parallel: it measures a rate.
func TestProducerSharedRateLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := newProducerRig(t)
	const perSec = 40
	dirs := []string{filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")}
	for _, d := range dirs {
		files := map[string]string{}
		for i := range 150 {
			files[fmt.Sprintf("f%03d.txt", i)] = strconv.Itoa(i)
		}
		mkTree(t, d, files)
	}
	rate := "JQ_PRODUCER_RATE_LIMIT_PER_SEC=" + strconv.Itoa(perSec)
	p1 := r.start(dirs[0], false, "JQ_PRODUCER_ONCE=true", rate)
	p2 := r.start(dirs[1], false, "JQ_PRODUCER_ONCE=true", rate)
	require.Zero(t, p1.WaitExit(t, time.Minute))
	require.Zero(t, p2.WaitExit(t, time.Minute))

	conn, err := pgx.Connect(ctx, r.dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var (
		n           int
		first, last time.Time
		firstBatch  int
	)
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*), min(created_at), max(created_at),
       count(*) FILTER (WHERE created_at = (SELECT min(created_at) FROM jobs)) FROM jobs`).Scan(&n, &first, &last, &firstBatch))
	require.Equal(t, 300, n)
	span := last.Sub(first)
	require.GreaterOrEqual(t, span, 5*time.Second, "long enough to measure")
	measured := float64(n-firstBatch) / span.Seconds() // jobs after the first batch, over the time they took
	t.Logf("two producers, limit %d/s: %d jobs in %v, %.1f jobs/s", perSec, n, span, measured)
	// The limit is what the code guarantees: the two together stay under it (each with a limit of
	// its own would reach twice it). How close they come to it from below is the machine's speed
	// on a loaded host (35.8/s was seen under load): only progress is asserted there.
	require.LessOrEqual(t, measured, perSec*1.1, "the combined rate stays within the shared limit")
	require.GreaterOrEqual(t, measured, perSec/4.0, "the producers make progress")
	for _, p := range []*jqbin.Process{p1, p2} {
		require.Len(t, withMessage(producerLines(p), "scan pass done"), 1)
	}

	// Watch mode, stopped by SIGTERM while it submits: the next run submits exactly the rest.
	dir := filepath.Join(t.TempDir(), "stop")
	files := map[string]string{}
	for i := range 200 {
		files[fmt.Sprintf("g%03d.txt", i)] = strconv.Itoa(i)
	}
	mkTree(t, dir, files)
	count := func() int {
		var c int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE convert_from(payload, 'UTF8')::jsonb->>'path' LIKE $1`, dir+"/%").Scan(&c))
		return c
	}
	p := r.start(dir, false, rate, "JQ_PRODUCER_METRICS_PORT=0")
	testenv.Eventually(t, time.Minute, func() error {
		if c := count(); c < 40 {
			return fmt.Errorf("%d jobs so far", c)
		}
		return nil
	})
	p.Signal(t, syscall.SIGTERM)
	require.Zero(t, p.WaitExit(t, time.Minute), "a stopped producer exits 0")
	before := count()
	require.Less(t, before, len(files), "stopped mid-scan")
	lines := r.produce(dir, false)
	require.Equal(t, len(files), count(), "nothing lost, nothing twice")
	require.EqualValues(t, len(files)-before, withMessage(lines, "scan pass done")[0]["new_jobs"])
}

// allRoleToken is the admin token of the --role=all process that scans a directory.
const allRoleToken = "jq_producer-e2e-all-role-token-0123456789"

// TestRoleAllProcessesADirectory: `jq --role=all` with producer.scan_dir set takes a directory of
// 1,000 files to DONE, each job's result carrying the file's SHA-256.
func TestRoleAllProcessesADirectory(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, prefix := testenv.NewRedis(t)
	dsn := testenv.NewDatabase(t)
	se := jqbin.NewServerEnv(t, dsn)
	dir := filepath.Join(t.TempDir(), "inbox")
	want := map[string]string{} // path → sha256
	for i := range 1000 {
		content := strings.Repeat(strconv.Itoa(i), 1+i%97)
		p := filepath.Join(dir, fmt.Sprintf("d%02d", i%13), fmt.Sprintf("f%04d.dat", i))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		sum := sha256.Sum256([]byte(content))
		want[p] = hex.EncodeToString(sum[:])
	}
	p := jqbin.Start(t, append(se.Env, "JQ_REDIS_KEY_PREFIX="+prefix,
		"JQ_WORKER_METRICS_PORT="+strconv.Itoa(jqbin.FreePort(t)), "JQ_WORKER_HEALTH_PORT="+strconv.Itoa(jqbin.FreePort(t)),
		"JQ_PRODUCER_METRICS_PORT="+strconv.Itoa(jqbin.FreePort(t)), "JQ_PRODUCER_RATE_LIMIT_PER_SEC=0",
		"JQ_WORKER_CONCURRENCY=8", "JQ_WORKER_FILE_ROOTS="+dir,
		// The file handler reaches the host: --role=all runs it only with authentication on.
		"JQ_AUTH_ENABLED=true", "JQ_AUTH_TOKENS=name=all;roles=admin;sha256="+auth.HashToken(allRoleToken),
		"JQ_TOKEN="+allRoleToken), "--role=all", "--scan-dir", dir)

	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	testenv.Eventually(t, 2*time.Minute, func() error {
		var done int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE state = 'DONE'`).Scan(&done); err != nil {
			return err
		}
		if done < len(want) {
			return fmt.Errorf("%d of %d jobs done", done, len(want))
		}
		return nil
	})
	rows, err := conn.Query(ctx, `SELECT convert_from(result, 'UTF8')::jsonb->>'path', convert_from(result, 'UTF8')::jsonb->>'sha256',
       (convert_from(result, 'UTF8')::jsonb->>'size')::bigint FROM jobs`)
	require.NoError(t, err)
	got := map[string]string{}
	for rows.Next() {
		var path, sum string
		var size int64
		require.NoError(t, rows.Scan(&path, &sum, &size))
		got[path] = sum
	}
	require.NoError(t, rows.Err())
	require.Equal(t, want, got, "every file once, with its checksum")
	var span time.Duration
	require.NoError(t, conn.QueryRow(ctx, `SELECT max(completed_at) - min(created_at) FROM jobs`).Scan(&span))
	t.Logf("--role=all: %d files scanned, submitted and hashed in %v (%.0f files/s)", len(want), span, float64(len(want))/span.Seconds())

	require.NoError(t, p.Cmd.Process.Signal(syscall.SIGTERM))
	require.Zero(t, p.WaitExit(t, time.Minute))
}
