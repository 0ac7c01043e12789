// Package healthcheck is `jq [--role=R] healthcheck [--url URL] [--timeout D]`: one GET of this
// process's own health endpoint, exit 0 on a 2xx answer and 1 otherwise. It exists for container
// HEALTHCHECKs: the runtime image is FROM scratch, with no shell or curl to probe with.
//
// It works under every role (the image sets JQ_ROLE for the whole container, the HEALTHCHECK
// included), so roles.Main hands it the command line before parsing the role's grammar. Without
// --url the target follows the role and the configuration (--config/JQ_CONFIG file and JQ_
// environment): the server's http://127.0.0.1:<health.port>/readyz, the worker's
// <worker.health_port>/readyz, the producer's <producer.metrics_port>/healthz (it has no /readyz).
package healthcheck

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jq-dev/jq/config"
)

// Command is the command's name on the jq command line.
const Command = "healthcheck"

// Exit codes, as the rest of jq's.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// Run runs the command for role ("server", "worker", "producer", "all"; as --role/JQ_ROLE
// resolved it) and returns the exit code. args is the whole command line, global flags included.
func Run(ctx context.Context, role string, args, environ []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("jq healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "health URL to GET (default: this role's /readyz on 127.0.0.1, from the configuration)")
	timeout := fs.Duration("timeout", 3*time.Second, "bound on the whole request")
	// The global flags may sit on either side of the command; only --config matters here.
	configPath := fs.String("config", lookup(environ, "JQ_CONFIG"), "YAML configuration file (JQ_CONFIG)")
	fs.String("role", "", "role whose endpoint to probe (JQ_ROLE)")
	var rest []string
	for _, a := range args {
		if a != Command {
			rest = append(rest, a)
		}
	}
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "jq healthcheck: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	target := *url
	if target == "" {
		cfg, _, err := config.Load(config.LoadOptions{File: *configPath, Environ: environ})
		if err != nil {
			fmt.Fprintf(stderr, "jq healthcheck: %v\n", err)
			return exitError
		}
		target = healthURL(role, cfg)
	}
	if err := probe(ctx, target, *timeout); err != nil {
		fmt.Fprintf(stderr, "jq healthcheck: %v\n", err)
		return exitError
	}
	return exitOK
}

// healthURL is the endpoint a container of this role answers on.
func healthURL(role string, cfg *config.Config) string {
	host, port, path := cfg.Health.Host, cfg.Health.Port, "/readyz"
	switch role {
	case "worker":
		host, port = cfg.Worker.BindHost, cfg.Worker.HealthPort
	case "producer":
		host, port, path = cfg.Producer.BindHost, cfg.Producer.MetricsPort, "/healthz"
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(port)) + path
}

// probe GETs url and succeeds on a 2xx status (/readyz says "degraded" with a 200).
func probe(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("bad --url: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// lookup is the last value of key in environ ("K=V" form), "" when unset.
func lookup(environ []string, key string) string {
	v := ""
	for _, kv := range environ {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}
