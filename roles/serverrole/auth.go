package serverrole

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/jq-dev/jq/api/auth"
	"github.com/jq-dev/jq/config"
)

// BuildAuth returns the API's authenticator, or nil when authentication is off. It refuses the
// unsafe configurations: authentication off, or on without TLS (tokens in cleartext), on a
// non-loopback address without auth.allow_insecure; authentication on with no credential
// configured (nobody could get in); and certificate rules without client certificates.
func BuildAuth(cfg *config.Config, log *zap.Logger, denied func(string)) (*auth.Authenticator, error) {
	host := cfg.GRPC.Host
	where := fmt.Sprintf("grpc.host %q", host)
	if host == "" {
		where = "every interface (grpc.host \"\")"
	}
	if !cfg.AuthRequired() {
		if !config.IsLoopback(host) && !cfg.Auth.AllowInsecure {
			return nil, fmt.Errorf("the API would listen on %s with authentication off: configure credentials (auth.tokens, auth.mtls_principals) and leave auth.enabled at auto, listen on 127.0.0.1, or set auth.allow_insecure: true", where)
		}
		return nil, nil
	}
	tokens, err := tokenEntries(cfg.Auth)
	if err != nil {
		return nil, err
	}
	var rules []auth.CertRule
	for i, s := range cfg.Auth.MTLSPrincipals {
		r, err := auth.ParseCertRule(s)
		if err != nil {
			return nil, fmt.Errorf("auth.mtls_principals[%d]: %w", i, err)
		}
		rules = append(rules, r)
	}
	if len(rules) > 0 && (!cfg.GRPC.TLS.Enabled || cfg.GRPC.TLS.ClientCAPath == "") {
		return nil, errors.New("auth.mtls_principals needs client certificates: set grpc.tls.enabled and grpc.tls.client_ca_path")
	}
	if len(tokens) == 0 && len(rules) == 0 {
		return nil, fmt.Errorf("authentication is on (the API listens on %s) but no credential is configured: add auth.tokens (jq --role=admin token new) or auth.mtls_principals, or listen on 127.0.0.1", where)
	}
	if !cfg.GRPC.TLS.Enabled && !config.IsLoopback(host) && !cfg.Auth.AllowInsecure {
		return nil, fmt.Errorf("the API would take tokens in cleartext on %s: enable grpc.tls (cert_path, key_path), listen on 127.0.0.1, or set auth.allow_insecure: true when a private network or a TLS-terminating proxy protects it", where)
	}
	log.Info("api authentication on", zap.Int("tokens", len(tokens)), zap.Int("certificate_rules", len(rules)),
		zap.Float64("rate_limit_per_sec", cfg.Auth.RateLimitPerSec))
	return auth.New(auth.Options{
		Tokens: tokens, CertRules: rules, Denied: denied, Log: log.Named("auth"),
		RateLimit: cfg.Auth.RateLimitPerSec, RateBurst: cfg.Auth.RateBurst,
	})
}

// tokenEntries reads auth.tokens and then auth.tokens_file (one entry a line; blank lines and
// lines starting with # are skipped). Errors name the key or line, never the hash.
func tokenEntries(a config.Auth) ([]auth.TokenEntry, error) {
	var out []auth.TokenEntry
	for i, s := range a.Tokens {
		e, err := auth.ParseTokenEntry(s)
		if err != nil {
			return nil, fmt.Errorf("auth.tokens[%d]: %w", i, err)
		}
		out = append(out, e)
	}
	if a.TokensFile == "" {
		return out, nil
	}
	f, err := os.Open(a.TokensFile)
	if err != nil {
		return nil, fmt.Errorf("auth.tokens_file: %w", err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		e, err := auth.ParseTokenEntry(line)
		if err != nil {
			return nil, fmt.Errorf("auth.tokens_file %s line %d: %w", a.TokensFile, n, err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("auth.tokens_file: %w", err)
	}
	return out, nil
}

// insecureInterval is how often a server running open on a non-loopback address says so.
const insecureInterval = time.Minute

// warnInsecure logs, at start and then every minute until ctx ends, that the API is open to
// anyone who reaches it (auth.allow_insecure).
func warnInsecure(ctx context.Context, log *zap.Logger, host string) {
	t := time.NewTicker(insecureInterval)
	defer t.Stop()
	for {
		log.Warn("api authentication is off on a non-loopback address: anyone who reaches it may do everything",
			zap.String("grpc_host", host), zap.String("setting", "auth.allow_insecure"))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
