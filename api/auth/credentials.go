package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// TokenPrefix starts every token jq issues, so a leaked one is recognisable
// (secret scanners, logs).
const TokenPrefix = "jq_"

// maxTokenBytes bounds what the server hashes from an Authorization header.
const maxTokenBytes = 512

// NewToken returns a fresh random token: 32 bytes from crypto/rand, URL-safe
// base64, prefixed.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("auth: random token: %w", err)
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// HashToken is the SHA-256 of a token in lowercase hex: what the server's
// configuration holds instead of the token. Tokens are 256-bit random values,
// so a plain (unsalted, fast) hash is enough: there is nothing to brute-force.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

var (
	nameRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$`)
	queueRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)
	hashRE  = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// TokenEntry is one configured token: auth.tokens entries read
//
//	name=ingest;roles=producer;sha256=<64 hex digits>[;queues=emails+images]
//
// (fields in any order; roles and queues joined with "+").
type TokenEntry struct {
	Name   string
	Roles  []Role
	SHA256 string
	Queues []string
}

// String is the entry in the syntax ParseTokenEntry reads.
func (e TokenEntry) String() string {
	roles := make([]string, len(e.Roles))
	for i, r := range e.Roles {
		roles[i] = string(r)
	}
	s := "name=" + e.Name + ";roles=" + strings.Join(roles, "+") + ";sha256=" + e.SHA256
	if len(e.Queues) > 0 {
		s += ";queues=" + strings.Join(e.Queues, "+")
	}
	return s
}

// ParseTokenEntry reads one auth.tokens entry. Errors never repeat the hash.
func ParseTokenEntry(s string) (TokenEntry, error) {
	f, err := fields(s, "name", "roles", "sha256", "queues")
	if err != nil {
		return TokenEntry{}, err
	}
	e := TokenEntry{Name: f["name"], SHA256: strings.ToLower(f["sha256"])}
	if !nameRE.MatchString(e.Name) {
		return TokenEntry{}, errors.New("name: want 1-64 of A-Z a-z 0-9 _ . @ - (starting with a letter or digit)")
	}
	if !hashRE.MatchString(e.SHA256) {
		return TokenEntry{}, errors.New("sha256: want the token's SHA-256 as 64 hex digits (jq --role=admin token new prints it)")
	}
	if e.Roles, err = parseRoles(f["roles"]); err != nil {
		return TokenEntry{}, err
	}
	if e.Queues, err = parseQueues(f["queues"]); err != nil {
		return TokenEntry{}, err
	}
	return e, nil
}

// CertRule maps client certificates to a principal: auth.mtls_principals
// entries read
//
//	cn=worker-*;roles=worker[;queues=emails]
//
// with exactly one of cn= (the subject's common name), dns= (a DNS SAN) or
// uri= (a URI SAN, e.g. spiffe://example.org/jq/worker). The pattern is the
// exact value, or ends in "*" to match every value with that prefix. The
// principal is named after the matched value: cert:cn:worker-1.
type CertRule struct {
	Kind    string // cn | dns | uri
	Pattern string
	Roles   []Role
	Queues  []string
}

// ParseCertRule reads one auth.mtls_principals entry.
func ParseCertRule(s string) (CertRule, error) {
	f, err := fields(s, "cn", "dns", "uri", "roles", "queues")
	if err != nil {
		return CertRule{}, err
	}
	var r CertRule
	for _, k := range []string{"cn", "dns", "uri"} {
		v, ok := f[k]
		if !ok {
			continue
		}
		if r.Kind != "" {
			return CertRule{}, errors.New("want exactly one of cn=, dns= or uri=")
		}
		if v == "" || v == "*" && k != "cn" || strings.ContainsAny(strings.TrimSuffix(v, "*"), "*") {
			return CertRule{}, fmt.Errorf("%s: want a value, or a prefix followed by one trailing *", k)
		}
		r.Kind, r.Pattern = k, v
	}
	if r.Kind == "" {
		return CertRule{}, errors.New("want one of cn=, dns= or uri= (which certificate field to match)")
	}
	if r.Roles, err = parseRoles(f["roles"]); err != nil {
		return CertRule{}, err
	}
	if r.Queues, err = parseQueues(f["queues"]); err != nil {
		return CertRule{}, err
	}
	return r, nil
}

// Match returns the identity of the certificate this rule matches
// ("cn:worker-1"), or false.
func (r CertRule) Match(cert *x509.Certificate) (string, bool) {
	var values []string
	switch r.Kind {
	case "cn":
		values = []string{cert.Subject.CommonName}
	case "dns":
		values = cert.DNSNames
	case "uri":
		for _, u := range cert.URIs {
			values = append(values, u.String())
		}
	}
	for _, v := range values {
		if v == "" {
			continue
		}
		if prefix, wild := strings.CutSuffix(r.Pattern, "*"); wild && strings.HasPrefix(v, prefix) || v == r.Pattern {
			return r.Kind + ":" + v, true
		}
	}
	return "", false
}

// fields splits "k=v;k=v" into a map, refusing unknown and repeated keys.
func fields(s string, known ...string) (map[string]string, error) {
	out := map[string]string{}
	for part := range strings.SplitSeq(strings.TrimSpace(s), ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		k = strings.TrimSpace(k)
		if !ok {
			return nil, fmt.Errorf("%q: want key=value", clip(k))
		}
		if !slices.Contains(known, k) {
			return nil, fmt.Errorf("unknown field %q (want %s)", clip(k), strings.Join(known, ", "))
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("field %s given twice", k)
		}
		out[k] = strings.TrimSpace(v)
	}
	return out, nil
}

func parseRoles(s string) ([]Role, error) {
	if s == "" {
		return nil, errors.New("roles: want at least one of producer, worker, viewer, admin (joined with +)")
	}
	var out []Role
	for name := range strings.SplitSeq(s, "+") {
		r, err := ParseRole(name)
		if err != nil {
			return nil, fmt.Errorf("roles: %w", err)
		}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out, nil
}

func parseQueues(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var out []string
	for q := range strings.SplitSeq(s, "+") {
		q = strings.TrimSpace(q)
		if !queueRE.MatchString(q) {
			return nil, fmt.Errorf("queues: %q is not a queue name", clip(q))
		}
		out = append(out, q)
	}
	return out, nil
}

// clip keeps error messages short whatever the input.
func clip(s string) string {
	const limit = 40
	if len(s) > limit {
		return s[:limit] + "…"
	}
	return s
}
