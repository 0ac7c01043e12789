// Package auth decides who is calling the jq API and what they may do.
//
// Authentication reads a bearer token (Authorization: Bearer …, compared by
// its SHA-256 hash: the server never holds a token itself) or, without a token,
// the client certificate of an mTLS connection, mapped to a principal by a
// rule on its subject (CN, DNS or URI SAN). Authorization is a table from RPC
// to the roles that may call it (Policy); the rules that depend on the data —
// a worker acts only on worker ids it registered, a producer sees only the
// jobs it submitted — are enforced by the handlers with FromContext.
//
// A denied request changes nothing: the interceptor answers UNAUTHENTICATED
// or PERMISSION_DENIED before the handler runs, counts the refusal by reason
// and logs it at most once a minute per principal (or per address, for
// callers without credentials).
package auth

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Role is a set of RPCs a principal may call (docs/security.md has the table).
type Role string

// The roles. Admin may call everything.
const (
	RoleProducer Role = "producer" // submit; get, list, cancel its own jobs, their results and events
	RoleWorker   Role = "worker"   // register, heartbeat, stream, ack, report, deregister its own workers
	RoleViewer   Role = "viewer"   // read-only: status, stats, lists, peek, jobs, events
	RoleAdmin    Role = "admin"    // everything
)

// Roles lists every role, in the order the documentation gives them.
var Roles = []Role{RoleProducer, RoleWorker, RoleViewer, RoleAdmin}

// ParseRole accepts a role name.
func ParseRole(s string) (Role, error) {
	r := Role(strings.TrimSpace(s))
	if slices.Contains(Roles, r) {
		return r, nil
	}
	return "", fmt.Errorf("unknown role %q (want producer, worker, viewer or admin)", s)
}

// Principal is an authenticated caller.
type Principal struct {
	// Name identifies the principal in logs, metrics and ownership records:
	// "token:<name>" or "cert:<kind>:<value>" (cert:cn:worker-1).
	Name  string
	Roles []Role
	// Queues, when not empty, are the only queues a worker of this principal
	// may take jobs from (and a producer may submit to).
	Queues []string
}

// Has reports whether p holds role r; admin holds every role.
func (p *Principal) Has(r Role) bool {
	return slices.Contains(p.Roles, r) || slices.Contains(p.Roles, RoleAdmin)
}

// IsAdmin reports whether p may do everything.
func (p *Principal) IsAdmin() bool { return slices.Contains(p.Roles, RoleAdmin) }

// AllowsQueue reports whether p may use queue q.
func (p *Principal) AllowsQueue(q string) bool {
	return len(p.Queues) == 0 || p.IsAdmin() || slices.Contains(p.Queues, q)
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the caller of the request ctx belongs to. ok is false
// when authentication is off: every caller may do everything then.
func FromContext(ctx context.Context) (p *Principal, ok bool) {
	p, ok = ctx.Value(principalKey{}).(*Principal)
	return p, ok && p != nil
}

// Owner is the name recorded as the owner of what the request creates (a
// worker registration, a job): the principal's name, or "" when
// authentication is off.
func Owner(ctx context.Context) string {
	if p, ok := FromContext(ctx); ok {
		return p.Name
	}
	return ""
}

// Restricted reports whether ownership rules apply to the caller: they do for
// every authenticated principal except admins.
func Restricted(ctx context.Context) (*Principal, bool) {
	p, ok := FromContext(ctx)
	if !ok || p.IsAdmin() {
		return nil, false
	}
	return p, true
}
