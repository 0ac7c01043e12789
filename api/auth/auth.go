package auth

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/jq-dev/jq/api/apierr"
	"github.com/jq-dev/jq/queue"
)

// Reasons a request is refused, the label of jq_auth_denied_total.
const (
	ReasonMissing       = "missing_credentials" // no token and no mapped certificate
	ReasonInvalidToken  = "invalid_token"       // a token that matches no configured hash
	ReasonUnknownCert   = "unknown_certificate" // a verified certificate no rule maps
	ReasonForbidden     = "forbidden"           // the principal's roles do not allow the RPC
	ReasonNotOwner      = "not_owner"           // a worker id, queue or job that is not the principal's
	ReasonRateLimited   = "rate_limited"        // over auth.rate_limit_per_sec
	ReasonStreamLimit   = "stream_limit"        // too many open worker streams
	ReasonWorkerLimit   = "worker_limit"        // too many registered workers
	denialLogInterval   = time.Minute
	maxDenialLogEntries = 10000
)

// Reasons lists every reason, for metrics that start at zero.
var Reasons = []string{ReasonMissing, ReasonInvalidToken, ReasonUnknownCert, ReasonForbidden, ReasonNotOwner,
	ReasonRateLimited, ReasonStreamLimit, ReasonWorkerLimit}

// Options configure an Authenticator.
type Options struct {
	Tokens    []TokenEntry
	CertRules []CertRule
	// RateLimit is each principal's sustained requests per second (0: unlimited), RateBurst the
	// requests it may make at once (0: one second's worth).
	RateLimit float64
	RateBurst int
	// Denied is called once for every refused request (metrics); nil: not counted.
	Denied func(reason string)
	Log    *zap.Logger
	Now    func() time.Time
}

// Authenticator authenticates requests and applies the policy table.
type Authenticator struct {
	tokens map[[32]byte]*Principal
	rules  []CertRule
	denied func(string)
	log    *zap.Logger
	now    func() time.Time

	rateLimit rate.Limit
	rateBurst int

	mu       sync.Mutex
	limiters map[string]*rate.Limiter
	logged   map[string]time.Time // principal (or address) + reason → last log line
}

// New checks the credentials (no name or hash twice) and returns the
// authenticator.
func New(opts Options) (*Authenticator, error) {
	a := &Authenticator{
		tokens: map[[32]byte]*Principal{}, rules: opts.CertRules, denied: opts.Denied, log: opts.Log, now: opts.Now,
		rateLimit: rate.Limit(opts.RateLimit), rateBurst: opts.RateBurst,
		limiters: map[string]*rate.Limiter{}, logged: map[string]time.Time{},
	}
	if a.log == nil {
		a.log = zap.NewNop()
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.denied == nil {
		a.denied = func(string) {}
	}
	if a.rateLimit > 0 && a.rateBurst <= 0 {
		a.rateBurst = max(1, int(opts.RateLimit))
	}
	names := map[string]bool{}
	for i, t := range opts.Tokens {
		raw, err := hex.DecodeString(t.SHA256)
		if err != nil || len(raw) != 32 {
			return nil, fmt.Errorf("auth: token %d (%s): sha256 is not 64 hex digits", i+1, t.Name)
		}
		var h [32]byte
		copy(h[:], raw)
		if _, dup := a.tokens[h]; dup {
			return nil, fmt.Errorf("auth: token %q: the same token hash is configured twice", t.Name)
		}
		if names[t.Name] {
			return nil, fmt.Errorf("auth: token name %q is configured twice", t.Name)
		}
		names[t.Name] = true
		a.tokens[h] = &Principal{Name: "token:" + t.Name, Roles: t.Roles, Queues: t.Queues}
	}
	return a, nil
}

// Denial is a refused request: the code the client gets, the metric's reason and the message.
type Denial struct {
	Code   connect.Code
	Reason string
	Msg    string
}

func (d *Denial) Error() string { return d.Msg }

// connectError is the denial as the client gets it: its code and message, with the reason of the
// sentinel the code stands for among refusals (api/apierr), so clients tell a rate limit from a
// server limit without reading the message.
func (d *Denial) connectError() *connect.Error {
	var sentinel error
	switch d.Code { //nolint:exhaustive // a denial has one of these three codes
	case connect.CodeUnauthenticated:
		sentinel = queue.ErrUnauthenticated
	case connect.CodePermissionDenied:
		sentinel = queue.ErrPermissionDenied
	case connect.CodeResourceExhausted:
		sentinel = apierr.ErrRateLimited
	default:
		return connect.NewError(d.Code, d)
	}
	return apierr.New(sentinel, d.Msg)
}

// Authenticate finds the principal of a request from its headers and TLS state.
func (a *Authenticator) Authenticate(h http.Header, state *tls.ConnectionState) (*Principal, *Denial) {
	if authz := h.Get("Authorization"); authz != "" {
		scheme, tok, _ := strings.Cut(strings.TrimSpace(authz), " ")
		tok = strings.TrimSpace(tok)
		if !strings.EqualFold(scheme, "Bearer") || tok == "" {
			return nil, &Denial{connect.CodeUnauthenticated, ReasonInvalidToken, "authorization header: want \"Bearer <token>\""}
		}
		if p := a.lookupToken(tok); p != nil {
			return p, nil
		}
		return nil, &Denial{connect.CodeUnauthenticated, ReasonInvalidToken, "invalid token"}
	}
	if state != nil && len(state.PeerCertificates) > 0 {
		cert := state.PeerCertificates[0]
		for _, r := range a.rules {
			if id, ok := r.Match(cert); ok {
				return &Principal{Name: "cert:" + id, Roles: r.Roles, Queues: r.Queues}, nil
			}
		}
		return nil, &Denial{connect.CodeUnauthenticated, ReasonUnknownCert,
			fmt.Sprintf("client certificate (CN %q) is not mapped to a principal (auth.mtls_principals)", clip(cert.Subject.CommonName))}
	}
	return nil, &Denial{connect.CodeUnauthenticated, ReasonMissing,
		"authentication required: send a token (Authorization: Bearer <token>) or a client certificate"}
}

func (a *Authenticator) lookupToken(tok string) *Principal {
	if len(tok) > maxTokenBytes {
		return nil
	}
	// A map lookup by the token's hash: timing can at most reveal something about the hash of
	// a guess, never about a configured token.
	return a.tokens[sha256.Sum256([]byte(tok))]
}

// Authorize applies the policy table and the principal's rate limit.
func (a *Authenticator) Authorize(p *Principal, procedure string) *Denial {
	if !Allowed(p, procedure) {
		return &Denial{connect.CodePermissionDenied, ReasonForbidden, fmt.Sprintf("%s (roles %s) may not call %s (needs %s)",
			p.Name, joinRoles(p.Roles), strings.TrimPrefix(procedure, "/"), joinRoles(RolesFor(procedure)))}
	}
	if a.rateLimit > 0 && !a.limiter(p.Name).Allow() {
		return &Denial{connect.CodeResourceExhausted, ReasonRateLimited,
			fmt.Sprintf("%s is over its request rate (auth.rate_limit_per_sec %g); retry later", p.Name, float64(a.rateLimit))}
	}
	return nil
}

func (a *Authenticator) limiter(name string) *rate.Limiter {
	a.mu.Lock()
	defer a.mu.Unlock()
	l, ok := a.limiters[name]
	if !ok {
		l = rate.NewLimiter(a.rateLimit, a.rateBurst)
		a.limiters[name] = l
	}
	return l
}

// Refused counts a refusal and logs it, at most once a minute for each principal (or, without
// one, each client address) and reason.
func (a *Authenticator) Refused(who, procedure string, d *Denial) {
	a.denied(d.Reason)
	key := who + "\x00" + d.Reason
	now := a.now()
	a.mu.Lock()
	last, seen := a.logged[key]
	if seen && now.Sub(last) < denialLogInterval {
		a.mu.Unlock()
		return
	}
	if len(a.logged) >= maxDenialLogEntries {
		clear(a.logged)
	}
	a.logged[key] = now
	a.mu.Unlock()
	a.log.Warn("request refused", zap.String("principal", who), zap.String("procedure", procedure),
		zap.String("reason", d.Reason), zap.String("code", d.Code.String()), zap.String("detail", d.Msg))
}

// Interceptor authenticates and authorizes every unary and streaming call
// before its handler runs, and puts the principal into the context. A
// handler's own PERMISSION_DENIED (not the owner) is counted and logged the
// same way.
func (a *Authenticator) Interceptor() connect.Interceptor { return &interceptor{a: a} }

type interceptor struct{ a *Authenticator }

func (i *interceptor) check(ctx context.Context, procedure string, h http.Header, peer connect.Peer) (context.Context, error) {
	if _, ok := FromContext(ctx); ok { // Middleware has checked this request already
		return ctx, nil
	}
	p, d := i.a.Authenticate(h, tlsState(ctx))
	if d == nil {
		d = i.a.Authorize(p, procedure)
	}
	if d != nil {
		who := "addr:" + peerHost(peer.Addr)
		if p != nil {
			who = p.Name
		}
		i.a.Refused(who, procedure, d)
		return ctx, d.connectError()
	}
	return WithPrincipal(ctx, p), nil
}

func (i *interceptor) after(ctx context.Context, procedure string, err error) {
	if connect.CodeOf(err) != connect.CodePermissionDenied {
		return
	}
	if p, ok := FromContext(ctx); ok {
		msg := err.Error()
		var ce *connect.Error
		if errors.As(err, &ce) {
			msg = ce.Message()
		}
		i.a.Refused(p.Name, procedure, &Denial{connect.CodePermissionDenied, ReasonNotOwner, msg})
	}
}

func (i *interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		ctx, err := i.check(ctx, req.Spec().Procedure, req.Header(), req.Peer())
		if err != nil {
			return nil, err
		}
		resp, err := next(ctx, req)
		i.after(ctx, req.Spec().Procedure, err)
		return resp, err
	}
}

func (i *interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i *interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		ctx, err := i.check(ctx, conn.Spec().Procedure, conn.RequestHeader(), conn.Peer())
		if err != nil {
			return err
		}
		err = next(ctx, conn)
		i.after(ctx, conn.Spec().Procedure, err)
		return err
	}
}

type tlsKey struct{}

// WithTLSState makes each request's TLS connection state (its client
// certificate) available to the interceptor; wrap the API's http.Handler
// with it.
func WithTLSState(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil {
			r = r.WithContext(context.WithValue(r.Context(), tlsKey{}, r.TLS))
		}
		next.ServeHTTP(w, r)
	})
}

func tlsState(ctx context.Context) *tls.ConnectionState {
	s, _ := ctx.Value(tlsKey{}).(*tls.ConnectionState)
	return s
}

func peerHost(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

func joinRoles(rs []Role) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, "|")
}
