package auth

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"connectrpc.com/connect"
	"golang.org/x/time/rate"
)

// maxRefusalSources bounds the per-address refusal limiters; past it they start afresh (an
// attacker with more addresses than this gains a fresh budget, never memory).
const maxRefusalSources = 16384

// HTTPOptions configure Middleware.
type HTTPOptions struct {
	// Public reports the paths served without credentials (the gRPC health service, the
	// OpenAPI document).
	Public func(path string) bool
	// RefusalRate is the refused requests per second one source address may cause before the
	// next refusals close its connection (0: unlimited); the burst is twice that.
	RefusalRate float64
}

// Middleware authenticates and authorizes every request from its headers and TLS state
// alone, before any byte of the body is read or decoded: an anonymous 4 MiB SubmitJobs costs
// the same few microseconds to refuse as an empty one, and a malformed anonymous body gets
// UNAUTHENTICATED, not a decoder error. The refusal is written in the caller's protocol
// (Connect, gRPC, gRPC-Web), counted by reason and logged as the interceptor's are; the
// principal goes into the request's context, where Interceptor finds it.
//
// A source address past its RefusalRate gets RESOURCE_EXHAUSTED and its HTTP/1 connection
// closed: a client guessing tokens pays a new connection per try. Its authenticated requests
// are never held back by its refusals (a NAT may hide a legitimate client behind it).
func (a *Authenticator) Middleware(next http.Handler, opts HTTPOptions) http.Handler {
	m := &httpAuth{a: a, next: next, public: opts.Public, ew: connect.NewErrorWriter(),
		rate: rate.Limit(opts.RefusalRate), burst: max(1, int(2*opts.RefusalRate)),
		sources: map[string]*rate.Limiter{}}
	if m.public == nil {
		m.public = func(string) bool { return false }
	}
	return m
}

type httpAuth struct {
	a      *Authenticator
	next   http.Handler
	public func(string) bool
	ew     *connect.ErrorWriter
	rate   rate.Limit
	burst  int

	mu      sync.Mutex
	sources map[string]*rate.Limiter
}

func (m *httpAuth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.TLS != nil {
		r = r.WithContext(context.WithValue(r.Context(), tlsKey{}, r.TLS))
	}
	if m.public(r.URL.Path) {
		m.next.ServeHTTP(w, r)
		return
	}
	procedure := r.URL.Path
	p, d := m.a.Authenticate(r.Header, r.TLS)
	if d == nil {
		d = m.a.Authorize(p, procedure)
	}
	if d == nil {
		m.next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
		return
	}
	host := peerHost(r.RemoteAddr)
	who := "addr:" + host
	if p != nil {
		who = p.Name
	}
	if p == nil && !m.allowRefusal(host) {
		d = &Denial{connect.CodeResourceExhausted, ReasonRateLimited,
			fmt.Sprintf("too many refused requests from %s; retry later", host)}
		// On HTTP/1 the connection goes with the answer; HTTP/2 streams are closed by the peer.
		w.Header().Set("Connection", "close")
	}
	m.a.Refused(who, procedure, d)
	_ = m.ew.Write(w, r, d.connectError())
}

// allowRefusal takes one refusal from host's budget.
func (m *httpAuth) allowRefusal(host string) bool {
	if m.rate <= 0 {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.sources[host]
	if !ok {
		if len(m.sources) >= maxRefusalSources {
			clear(m.sources)
		}
		l = rate.NewLimiter(m.rate, m.burst)
		m.sources[host] = l
	}
	return l.AllowN(m.a.now(), 1)
}
