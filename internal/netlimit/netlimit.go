// Package netlimit bounds what a listener's clients may hold: a total and a per-source cap on
// open connections, sized under the process's file-descriptor limit, and the timeouts of the
// small HTTP servers (health, metrics) that face no credential. A connection over a cap is
// accepted and closed at once, so it costs a descriptor for microseconds and the kernel's
// backlog never fills with connections nobody will serve.
package netlimit

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Options configure Wrap.
type Options struct {
	// Max bounds the open connections (0: unlimited); PerSource those from one IP address.
	Max       int
	PerSource int
	// Refused is called for every connection closed over a cap (ReasonTotal or
	// ReasonPerSource); nil: not counted.
	Refused func(reason string)
	// Now is the clock for AcceptHealthy (nil: time.Now).
	Now func() time.Time
}

// The caps a connection can be refused at.
const (
	ReasonTotal     = "total"
	ReasonPerSource = "per_source"
)

// Listener is a net.Listener with connection caps.
type Listener struct {
	net.Listener
	opts Options

	mu     sync.Mutex
	open   int
	source map[string]int

	lastAcceptErr atomic.Int64 // unix nanos of the last failed accept (EMFILE and the like)
}

// Wrap bounds ln's connections.
func Wrap(ln net.Listener, opts Options) *Listener {
	if opts.Refused == nil {
		opts.Refused = func(string) {}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Listener{Listener: ln, opts: opts, source: map[string]int{}}
}

// Accept returns the next connection within the caps; those over a cap are closed here.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				l.lastAcceptErr.Store(l.opts.Now().UnixNano())
			}
			return nil, err
		}
		host := hostOf(c.RemoteAddr())
		if reason := l.take(host); reason != "" {
			// Counted before the close: a peer that sees its connection closed finds the
			// refusal counted (TestAbuseCapsCloseExtraConnections failed the other way round).
			l.opts.Refused(reason)
			_ = c.Close()
			continue
		}
		return &conn{Conn: c, release: func() { l.give(host) }}, nil
	}
}

func (l *Listener) take(host string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.opts.Max > 0 && l.open >= l.opts.Max {
		return ReasonTotal
	}
	if l.opts.PerSource > 0 && l.source[host] >= l.opts.PerSource {
		return ReasonPerSource
	}
	l.open++
	l.source[host]++
	return ""
}

func (l *Listener) give(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.source[host]--; l.source[host] <= 0 {
		delete(l.source, host)
	}
}

// Open is the number of connections held now.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// acceptErrWindow is how long a failed accept keeps AcceptHealthy failing.
const acceptErrWindow = 5 * time.Second

// AcceptHealthy reports why the listener cannot take a new connection now: it is at its total
// cap, or an accept failed within the last seconds (out of file descriptors). nil: it can.
func (l *Listener) AcceptHealthy() error {
	if l.opts.Max > 0 && l.Open() >= l.opts.Max {
		return fmt.Errorf("at its connection cap (%d)", l.opts.Max)
	}
	if t := l.lastAcceptErr.Load(); t != 0 && l.opts.Now().Sub(time.Unix(0, t)) < acceptErrWindow {
		return errors.New("accepting connections failed within the last 5s (file descriptors exhausted?)")
	}
	return nil
}

type conn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

func hostOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	h, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return h
}

// RaiseFDLimit raises the soft RLIMIT_NOFILE to the hard limit and returns the result. Go's
// runtime does the same at start on Linux; calling it here makes the figure the caps are sized
// from explicit and survives a runtime that stops doing so.
func RaiseFDLimit() (uint64, error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, fmt.Errorf("getrlimit: %w", err)
	}
	if r.Cur < r.Max {
		r.Cur = r.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
			return r.Cur, fmt.Errorf("setrlimit: %w", err)
		}
	}
	return r.Cur, nil
}

// Side listeners (health, metrics) take little: a probe or a scrape at a time from a few
// sources.
const (
	SideMax       = 256
	SidePerSource = 32
)

// fdReserve is kept back from the API's share for everything else the process opens: database
// and Redis pools, Kafka, log files, the side listeners.
const fdReserve = 512

// APIMax is the API listener's default total cap for a process whose descriptor limit is
// fdLimit: what is left after fdReserve and the side listeners, never below 64.
func APIMax(fdLimit uint64) int {
	if fdLimit > 1<<30 {
		return 1 << 20
	}
	n := int64(fdLimit) - fdReserve - 2*SideMax
	return int(max(n, 64))
}

// SideServer is the http.Server of a health or metrics port: it must answer probes while
// nobody can hold its connections, so every phase of a request is timed and idle keep-alive
// connections are closed. writeTimeout 0 leaves writes unbounded (a CPU profile on the
// metrics port streams for its duration).
func SideServer(h http.Handler, writeTimeout time.Duration) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       30 * time.Second,
		MaxHeaderBytes:    16 << 10,
	}
}
