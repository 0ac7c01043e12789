package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat: 100 on Linux/x86-64.
const clockTicks = 100

// cpuSnapshot holds utime+stime per pid, grouped by the name the report uses.
type cpuSnapshot struct {
	at    time.Time
	ticks map[string]map[int]int64 // group → pid → ticks
}

// takeCPU reads the compare process itself, the named processes of a system, and the PostgreSQL
// and Redis instances of the run (instance; the whole instance, other users of it included), or
// every process named postgres or redis-server when those were not found.
func takeCPU(named map[string]int) cpuSnapshot {
	s := cpuSnapshot{at: time.Now(), ticks: map[string]map[int]int64{}}
	add := func(group string, pid int) {
		t, ok := procTicks(pid)
		if !ok {
			return
		}
		if s.ticks[group] == nil {
			s.ticks[group] = map[int]int64{}
		}
		s.ticks[group][pid] = t
	}
	add("compare", os.Getpid())
	for name, pid := range named {
		add(name, pid)
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		comm, err := os.ReadFile(filepath.Join(d, "comm"))
		if err != nil {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		switch strings.TrimSpace(string(comm)) {
		case "postgres":
			if instance.postmaster == 0 || pid == instance.postmaster || ppid(pid) == instance.postmaster {
				add("postgres", pid)
			}
		case "redis-server":
			if instance.redis == 0 || pid == instance.redis {
				add("redis", pid)
			}
		}
	}
	if instance.postmaster != 0 {
		// Backends that ended: their CPU moves to the postmaster's reaped-children ticks (one that
		// started before the interval and ended in it is counted whole: a small overcount).
		if s.ticks["postgres"] == nil {
			s.ticks["postgres"] = map[int]int64{}
		}
		s.ticks["postgres"][-instance.postmaster] = reapedTicks(instance.postmaster)
	}
	return s
}

// procTicks is utime+stime of pid (fields 14 and 15 of /proc/<pid>/stat).
func procTicks(pid int) (int64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command (field 2) may hold spaces; the fields after its closing parenthesis do not.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return u + st, true
}

// cpuCores is each group's CPU between two snapshots in cores (CPU seconds ÷ wall seconds). A pid
// that appeared in between counts from zero; one that exited in between is lost (its last ticks
// are unknown), which undercounts short-lived Postgres backends.
func cpuCores(before, after cpuSnapshot) map[string]float64 {
	wall := after.at.Sub(before.at).Seconds()
	out := map[string]float64{}
	if wall <= 0 {
		return out
	}
	for group, pids := range after.ticks {
		var sum int64
		for pid, t := range pids {
			sum += t - before.ticks[group][pid]
		}
		out[group] = round2(float64(sum) / clockTicks / wall)
	}
	return out
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }
