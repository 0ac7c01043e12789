package handlers

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"strings"
)

// URLPrefix is an entry of the http handler's allow-list
// (worker.http.allow): a scheme, a host (with its port unless the scheme's
// default) and a path. A URL starts with it when, both normalized (scheme and
// host lower-cased, a trailing dot and the default port dropped, dot segments
// of the path removed), scheme and host are equal and the URL's path is the
// prefix's path or continues it after a "/". So https://a.example.com/hooks
// admits https://A.example.com:443/hooks/x but not
// https://a.example.com.evil.com/hooks, https://a.example.com/hooksX or
// https://a.example.com/hooks/../admin.
type URLPrefix struct {
	Scheme string
	Host   string
	Path   string
}

// ParseURLPrefix parses an allow-list entry: an absolute http(s) URL without
// user information, query or fragment.
func ParseURLPrefix(s string) (URLPrefix, error) {
	u, err := normalizeURL(s)
	if err != nil {
		return URLPrefix{}, err
	}
	if u.RawQuery != "" || strings.Contains(s, "#") {
		return URLPrefix{}, fmt.Errorf("%q: an allow-list entry has no query or fragment", s)
	}
	return URLPrefix{Scheme: u.Scheme, Host: u.Host, Path: u.Path}, nil
}

// Match reports whether u, normalized by the handler, starts with p.
func (p URLPrefix) Match(u *url.URL) bool {
	if u.Scheme != p.Scheme || u.Host != p.Host {
		return false
	}
	if u.Path == p.Path {
		return true
	}
	dir := p.Path
	if !strings.HasSuffix(dir, "/") {
		dir += "/"
	}
	return strings.HasPrefix(u.Path, dir)
}

// normalizeURL parses an absolute http(s) URL into the form that is both
// compared with the allow-list and requested: lower-case scheme and host,
// no trailing dot, no default port, a path without dot segments ("/" when
// empty), no fragment. User information is refused (https://allowed@evil/
// reads as allowed to a human), and so is a path whose dot segments hide
// behind an encoded slash.
func normalizeURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, unwrapURLError(err)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%s: the URL must be absolute http or https", redact(raw))
	case u.Opaque != "" || u.Host == "":
		return nil, fmt.Errorf("%s: the URL has no host", redact(raw))
	case u.User != nil:
		return nil, fmt.Errorf("%s: user information in the URL is not allowed (use a header)", redact(raw))
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" {
		return nil, fmt.Errorf("%s: the URL has no host", redact(raw))
	}
	port := u.Port()
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	u.Host = host
	if strings.Contains(host, ":") { // IPv6
		u.Host = "[" + host + "]"
	}
	if port != "" {
		u.Host = net.JoinHostPort(host, port)
	}
	clean := "/"
	if u.Path != "" {
		clean = path.Clean(u.Path)
		if strings.HasSuffix(u.Path, "/") && clean != "/" {
			clean += "/"
		}
	}
	if u.RawPath != "" && clean != u.Path {
		return nil, errors.New(redact(raw) + ": the path has dot segments behind an encoded slash")
	}
	if u.RawPath == "" || clean != u.Path {
		u.Path, u.RawPath = clean, ""
	}
	u.Fragment, u.RawFragment = "", ""
	return u, nil
}

// redact is raw without user information and query: what an error message
// may show of a URL (a query often carries a token).
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	q := u.RawQuery != ""
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	s := u.String()
	if q {
		s += "?…"
	}
	return s
}
