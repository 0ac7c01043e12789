package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// instancePIDs are the server processes of the PostgreSQL and Redis instances the run uses, so that
// their CPU columns count those instances alone — not another cluster or redis-server on the
// machine (a test suite running beside the benchmark, say). 0: not found; the columns then count
// every process of that name.
type instancePIDs struct {
	postmaster int // the PostgreSQL instance's postmaster: it and its children
	redis      int // the redis-server process
}

var instance instancePIDs

// findInstances resolves the postmaster from the data directory's postmaster.pid (SHOW
// data_directory needs a superuser or pg_read_all_settings) and Redis from INFO server's
// process_id. Failures are reported and leave the name matching in place.
func findInstances(ctx context.Context, cfg *config) {
	conn, err := pgx.Connect(ctx, databaseURL(cfg.pgBase, "postgres"))
	if err == nil {
		var dir string
		if err = conn.QueryRow(ctx, "SHOW data_directory").Scan(&dir); err == nil {
			var b []byte
			if b, err = os.ReadFile(filepath.Join(dir, "postmaster.pid")); err == nil {
				first, _, _ := strings.Cut(string(b), "\n")
				instance.postmaster, err = strconv.Atoi(strings.TrimSpace(first))
			}
		}
		_ = conn.Close(ctx)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "compare: postgres CPU counts every postgres process on the machine: %v\n", err)
	}
	rc := redis.NewClient(&redis.Options{Addr: cfg.redisAddr})
	defer rc.Close()
	info, err := rc.Info(ctx, "server").Result()
	if err == nil {
		err = fmt.Errorf("INFO server has no process_id")
		for line := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
				instance.redis, err = strconv.Atoi(v)
				break
			}
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "compare: redis CPU counts every redis-server on the machine: %v\n", err)
	}
}

// ppid is the parent of pid (field 4 of /proc/<pid>/stat), 0 when unknown.
func ppid(pid int) int {
	f := statFields(pid)
	if len(f) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(f[1])
	return p
}

// statFields are the fields of /proc/<pid>/stat after the command (field 3 onwards).
func statFields(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

// reapedTicks is cutime+cstime of pid: the CPU of its children that exited and were waited for
// (a postmaster's backends that ended).
func reapedTicks(pid int) int64 {
	f := statFields(pid)
	if len(f) < 15 {
		return 0
	}
	cu, _ := strconv.ParseInt(f[13], 10, 64)
	cs, _ := strconv.ParseInt(f[14], 10, 64)
	return cu + cs
}
