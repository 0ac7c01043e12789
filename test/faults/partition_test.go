package faults

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/faultcheck"
	"github.com/jq-dev/jq/internal/testenv"
)

// partitionProxy forwards TCP connections to a target until cut: then it delivers nothing in
// either direction and holds new connections unanswered, as a network partition does (no RST,
// no FIN). heal closes what the cut held; new connections flow again.
type partitionProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns []net.Conn
	wake  chan struct{} // closed at heal
}

func startPartitionProxy(t *testing.T, target string) *partitionProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &partitionProxy{ln: ln, target: target, wake: make(chan struct{})}
	t.Cleanup(func() { _ = ln.Close(); p.heal() })
	go p.serve()
	return p
}

func (p *partitionProxy) addr() string { return p.ln.Addr().String() }

func (p *partitionProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *partitionProxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
}

// gate blocks while the network is cut; false: the cut ended with this connection closed.
func (p *partitionProxy) gate() bool {
	p.mu.Lock()
	cut, wake := p.cut, p.wake
	p.mu.Unlock()
	if !cut {
		return true
	}
	<-wake
	return false
}

func (p *partitionProxy) forward(c net.Conn) {
	p.track(c)
	if !p.gate() {
		_ = c.Close()
		return
	}
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.track(s)
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if !p.gate() { // read during the cut: never delivered
					break
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		_ = dst.Close()
		_ = src.Close()
	}
	go pipe(s, c)
	pipe(c, s)
}

func (p *partitionProxy) cutNow() {
	p.mu.Lock()
	p.cut = true
	p.mu.Unlock()
}

// heal closes every connection the cut held (their bytes are lost) and lets new ones through.
func (p *partitionProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cut {
		return
	}
	p.cut = false
	close(p.wake)
	p.wake = make(chan struct{})
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

type span struct {
	attempt    int
	start, end time.Time
}

func readSpans(t *testing.T, path string) map[string][]span {
	t.Helper()
	out := map[string][]span{}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return out
	}
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var id string
		var attempt int
		var s, e int64
		_, err := fmt.Sscanf(sc.Text(), "%s %d %d %d", &id, &attempt, &s, &e)
		require.NoError(t, err, sc.Text())
		out[id] = append(out[id], span{attempt, time.Unix(0, s), time.Unix(0, e)})
	}
	require.NoError(t, sc.Err())
	return out
}

// TestAbuseFaultPartitionNoOverlap: 8 jobs of 15 s on a worker whose network to
// the server is cut for 10 s. The server declares the worker lost after its heartbeat timeout and
// runs the jobs on another worker; the cut-off worker must have stopped each of them before (it
// fences itself at 3/4 of the timeout), so no two executions of a job overlap in time. Before
// self-fencing every job ran twice at once for about a second.
func TestAbuseFaultPartitionNoOverlap(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.startServer()
	ctx := r.ctx()
	r.createQueue(ctx, "work", 3, fastBackoffBase, fastBackoffMax)
	proxy := startPartitionProxy(t, r.servers[0].se.Addr())
	cutOff := r.startWorkerAt(proxy.addr(), "part-w1", 8, "work")
	cutOff.WaitLog(t, "assignment stream open")

	spans := filepath.Join(t.TempDir(), "spans")
	specs := r.faultJobs(8, "work", fault{Mode: "ok", MS: 15000})
	for _, s := range specs {
		s.Payload = []byte(strings.TrimSuffix(string(s.Payload), "}") + `,"spans":` + strconv.Quote(spans) + "}")
	}
	ids := r.submit(ctx, r.client(), specs)
	testenv.Eventually(t, 20*time.Second, func() error {
		m, err := faultcheck.ReadMarker(r.marker)
		if err == nil && m.Total() < len(ids) {
			err = fmt.Errorf("%d of %d handlers started", m.Total(), len(ids))
		}
		return err
	})
	proxy.cutNow()
	cut := time.Now()
	r.startWorker(0, "part-w2", 8, "work")
	// Heal after 10 s, as in the report: the cut-off worker comes back while the jobs run elsewhere.
	healed := make(chan struct{})
	go func() {
		defer close(healed)
		timer := time.NewTimer(10*time.Second - time.Since(cut))
		defer timer.Stop()
		<-timer.C
		proxy.heal()
	}()
	r.waitSettled(ctx, ids, 90*time.Second, nil)
	<-healed

	var got map[string][]span
	testenv.Eventually(t, 20*time.Second, func() error {
		got = readSpans(t, spans)
		n := 0
		for _, ss := range got {
			n += len(ss)
		}
		if n < 2*len(ids) {
			return fmt.Errorf("%d of %d executions ended", n, 2*len(ids))
		}
		return nil
	})
	minGap := time.Duration(1 << 62)
	overlaps := 0
	var fencedAfter []time.Duration
	for _, id := range ids {
		ss := got[id]
		require.Len(t, ss, 2, "job %s: one execution per attempt", id)
		for i := range ss {
			for j := range ss {
				if i == j || ss[i].attempt >= ss[j].attempt {
					continue
				}
				gap := ss[j].start.Sub(ss[i].end) // later attempt's start after the earlier's end
				if gap < 0 {
					overlaps++
					t.Errorf("job %s: attempt %d ran until %v after attempt %d started", id, ss[i].attempt, -gap, ss[j].attempt)
				}
				minGap = min(minGap, gap)
				fencedAfter = append(fencedAfter, ss[i].end.Sub(cut))
			}
		}
	}
	rep := r.check(ctx, ids)
	require.Equal(t, len(ids), rep.Done)
	require.Zero(t, overlaps)
	t.Logf("partition: jobs=%d × 15 s, cut 10 s, heartbeat timeout %v: concurrent executions 0; the cut-off worker "+
		"stopped each job %v–%v after the cut; the shortest gap before the next attempt started was %v",
		len(ids), faultHeartbeatTimeout, slices.Min(fencedAfter).Round(10*time.Millisecond),
		slices.Max(fencedAfter).Round(10*time.Millisecond), minGap.Round(10*time.Millisecond))
}
