// Package hostcheck refuses requests that reach a listener under a name that is not the
// listener's: the defence against DNS rebinding, where a page of another site has the browser
// resolve that site's name to 127.0.0.1 and then talks to a local jq as a same-origin page. The
// browser then sends the attacker's name as Host (and Origin), which no real client of jq does.
//
// One Policy serves every listener of a process (API, console, health, metrics). A request is
// served when its Host is an IP address (a page cannot rebind an address), localhost or a name
// under .localhost (browsers resolve those to loopback themselves), the listener's configured
// host, or one of the operator's extra names (server.allowed_hosts). A request that carries an
// Origin must also come from such a name, or from an IP address of loopback: another site's page
// is refused even when it reached the listener by address.
//
// The check applies where a request needs no credential (Enforce): the API and console with
// authentication off, and every listener bound to loopback. A listener on the network with
// authentication on is reached directly by its clients under any of the names the network gives
// it, and a rebinding page has no credential to send.
package hostcheck

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Options configure a Policy.
type Options struct {
	// Listen is the host the listener binds to (a name is allowed as Host); "" and addresses
	// add nothing.
	Listen string
	// Extra are more names clients use (server.allowed_hosts), without ports.
	Extra []string
	// Enforce switches the check on; off, every request is served.
	Enforce bool
}

// Policy decides which Host and Origin a listener serves.
type Policy struct {
	enforce bool
	names   map[string]bool
}

// New builds a Policy.
func New(opts Options) *Policy {
	p := &Policy{enforce: opts.Enforce, names: map[string]bool{}}
	for _, n := range append([]string{opts.Listen}, opts.Extra...) {
		if n = normal(n); n != "" && net.ParseIP(n) == nil {
			p.names[n] = true
		}
	}
	return p
}

// normal lowercases a host name and drops a trailing dot.
func normal(h string) string { return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".") }

// hostOnly drops the port of a Host header value, and an IPv6 address's brackets.
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
}

func (p *Policy) isName(h string) bool {
	h = normal(h)
	return h == "localhost" || strings.HasSuffix(h, ".localhost") || p.names[h]
}

// HostAllowed reports whether a request's Host names this listener.
func (p *Policy) HostAllowed(host string) bool {
	h := hostOnly(host)
	return net.ParseIP(h) != nil || p.isName(h)
}

// OriginAllowed reports whether a page of origin may send requests here: an origin on a name
// of this listener or on a loopback address.
func (p *Policy) OriginAllowed(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	h := u.Hostname()
	if ip := net.ParseIP(h); ip != nil {
		return ip.IsLoopback()
	}
	return p.isName(h)
}

// Check returns why r is refused, or nil.
func (p *Policy) Check(r *http.Request) error {
	if !p.enforce {
		return nil
	}
	if !p.HostAllowed(r.Host) {
		return fmt.Errorf("refused: Host %q is not a name of this server (an address, localhost, its listen host, or server.allowed_hosts)", excerpt(r.Host))
	}
	if o := r.Header.Get("Origin"); o != "" && !p.OriginAllowed(o) {
		return fmt.Errorf("refused: Origin %q is not this server's (a loopback address, localhost, its listen host, or server.allowed_hosts)", excerpt(o))
	}
	return nil
}

// Handler refuses with 403 Forbidden and one line what Check refuses, before next sees it.
func (p *Policy) Handler(next http.Handler) http.Handler {
	if !p.enforce {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := p.Check(r); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func excerpt(s string) string {
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}

// ForListener is the Policy of a listener bound to listen: enforced when it listens on loopback,
// or when open (it serves without credentials wherever it listens: the API and the console with
// authentication off). extra is server.allowed_hosts.
func ForListener(listen string, open bool, extra []string) *Policy {
	return New(Options{Listen: listen, Extra: extra, Enforce: open || isLoopback(listen)})
}

func isLoopback(host string) bool {
	if normal(host) == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
