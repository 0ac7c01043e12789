package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// cpuSnap is the CPU time (user + system clock ticks) of every process on the machine and of the
// machine as a whole, read from /proc, to say where the cores went during a measured window.
type cpuSnap struct {
	at      time.Time
	total   float64 // busy ticks of the machine (everything but idle and iowait)
	perProc map[int]procTicks
}

type procTicks struct {
	comm  string
	ticks float64
}

const clkTck = 100 // USER_HZ on Linux

func takeCPU() cpuSnap {
	s := cpuSnap{at: time.Now(), perProc: map[int]procTicks{}}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])
		for i, v := range f[1:] {
			if i == 3 || i == 4 { // idle, iowait
				continue
			}
			n, _ := strconv.ParseFloat(v, 64)
			s.total += n
		}
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, _ := strconv.Atoi(filepath.Base(d))
		b, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		st := string(b)
		l, r := strings.IndexByte(st, '('), strings.LastIndexByte(st, ')')
		if l < 0 || r < l {
			continue
		}
		f := strings.Fields(st[r+1:])
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseFloat(f[11], 64) // utime (field 14)
		k, _ := strconv.ParseFloat(f[12], 64) // stime (field 15)
		s.perProc[pid] = procTicks{comm: st[l+1 : r], ticks: u + k}
	}
	return s
}

// cpuCores is the mean number of cores each group used between a and b: "machine" (all busy
// time), "jq_server" (server or all-in-one nodes), "jq_workers", "postgres", "redis", "loadgen"
// (this program) and "other". Processes that ended inside the window are missing.
func cpuCores(a, b cpuSnap, e *env) map[string]float64 {
	sec := b.at.Sub(a.at).Seconds()
	role := map[int]string{}
	for _, p := range e.procs {
		g := "jq_workers"
		if p.name == "server" || strings.HasPrefix(p.name, "node") {
			g = "jq_server"
		}
		role[p.cmd.Process.Pid] = g
	}
	out := map[string]float64{"machine": (b.total - a.total) / clkTck / sec / 1}
	for pid, t := range b.perProc {
		d := t.ticks - a.perProc[pid].ticks
		if d <= 0 {
			continue
		}
		g, ok := role[pid]
		switch {
		case ok:
		case pid == os.Getpid():
			g = "loadgen"
		case t.comm == "postgres" || strings.HasPrefix(t.comm, "postgres"):
			g = "postgres"
		case strings.HasPrefix(t.comm, "redis"):
			g = "redis"
		default:
			g = "other"
		}
		out[g] += d / clkTck / sec
	}
	for k, v := range out {
		out[k] = float64(int(v*100+0.5)) / 100
	}
	return out
}
