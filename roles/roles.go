// Package roles turns a command line into running components: it parses the
// role's grammar, loads the configuration once, builds the logger, and starts
// the components the role table names, stopping them in reverse order.
package roles

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/jq-dev/jq/internal/term"

	"github.com/alecthomas/kong"
	"go.uber.org/zap"

	"github.com/jq-dev/jq/config"
	"github.com/jq-dev/jq/internal/buildinfo"
	"github.com/jq-dev/jq/roles/admin"
	"github.com/jq-dev/jq/roles/healthcheck"
	"github.com/jq-dev/jq/roles/telemetry"
)

// Exit codes of the jq binary (documented in --help).
const (
	ExitOK       = 0
	ExitError    = 1
	ExitUsage    = 2
	ExitNotFound = 3
)

// roleTable is the role graph as data (STYLE item 4): every component, the role that runs it and
// what it needs. A process builds and starts its role's components in table order, a component
// only after what it needs, and stops them in reverse (graph.go); --role=all runs them all.
//
// Outside the table, each for its reason: the admin role is one command against a server, run to
// its end (admin.Run); healthcheck is one GET, answered before the role's grammar is parsed;
// --dry-run checks the connections without starting anything.
var roleTable = []row{
	// The server's tracer provider: flushed last, after the engine's and the API's spans.
	{role: Server, name: "tracing", build: serverTracing},
	// Before any connection: an unsafe or broken auth configuration stops the server at once.
	{role: Server, name: "auth", build: serverAuth},
	// The system of record (store.driver: Postgres, or the embedded SQLite file) and dispatch
	// (Redis beside Postgres, in-process beside SQLite).
	{role: Server, name: "store", needs: []component{"tracing"}, after: []component{"auth"}, build: serverStoreOpen},
	{role: Server, name: "dispatch", needs: []component{"store"}, build: serverDispatch},
	// /healthz and /readyz answer from before the migration until the engine and the loops have stopped.
	{role: Server, name: "health", needs: []component{"store", "dispatch"}, build: serverHealth},
	{role: Server, name: "metrics", skip: metricsOff, build: serverMetrics},
	{role: Server, name: "migrate", needs: []component{"store"}, build: serverMigrate},
	// The engine writes events until it stops; the relay then finishes its batch in flight.
	{role: Server, name: "relay", needs: []component{"migrate"}, build: serverRelay},
	{role: Server, name: "background", needs: []component{"migrate"}, build: serverBackground},
	{role: Server, name: "engine", needs: []component{"tracing", "migrate", "dispatch", "relay"}, build: serverEngine},
	// The periodic jobs: the configured schedules reconciled at start, then the fire loop, which
	// submits through the engine (docs/schedules.md).
	{role: Server, name: "schedules", needs: []component{"engine"}, build: serverSchedules},
	// Stops first: assignment streams end, in-flight RPCs finish while the engine still runs.
	{role: Server, name: "api", needs: []component{"tracing", "auth", "health", "engine", "schedules"}, build: serverAPI},
	// The web console calls the API's handler in-process; it stops before the API.
	{role: Server, name: "console", needs: []component{"api"}, skip: consoleOff, build: serverConsole},
	// Once the server listens (and in --role=all its worker runs): where it is, and what to paste.
	{role: Server, name: "banner", after: []component{"api", "console", "metrics"}, build: serverBanner},
	// In --role=all the worker drains its jobs (reporting to the API) before the server stops.
	{role: Worker, name: "worker", after: []component{"api"}, build: workerPart},
	// A producer with producer.once submits its scan and ends; the others go on.
	{role: Producer, name: "producer", after: []component{"api", "worker"}, skip: producerOff, finite: true, build: producerPart},
}

// metricsOff leaves out the server's metrics listener when metrics.enabled is false.
func metricsOff(_ Name, cfg *config.Config) bool { return !cfg.Metrics.Enabled }

func consoleOff(_ Name, cfg *config.Config) bool { return cfg.UI.Enabled == config.UIOff }

// producerOff leaves the producer out of --role=all unless producer.scan_dir is set.
func producerOff(role Name, cfg *config.Config) bool {
	return role == All && cfg.Producer.ScanDir == ""
}

// IO is where a run reads and writes; tests pass buffers.
type IO struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// Main runs jq with args (without the program name) and returns the exit code.
// Only main handles signals: ctx is cancelled on SIGINT/SIGTERM.
func Main(ctx context.Context, args, environ []string, stdio IO) int {
	getenv := envLookup(environ)
	args, code, done := preflight(args, environ, getenv, stdio)
	if done {
		return code
	}
	if first := firstArg(args); first != "" && looksLikeJSONFilter(first) {
		fmt.Fprintf(stdio.Stderr, "jq: %q looks like a filter for the JSON processor also named jq; this jq is a job queue (run the other by its full path, e.g. /usr/bin/jq)\n", first)
		return ExitUsage
	}
	role, err := roleFromArgs(args, getenv)
	if err != nil {
		fmt.Fprintf(stdio.Stderr, "jq: %v\n", err)
		return ExitUsage
	}
	if firstArg(args) == healthcheck.Command {
		return healthcheck.Run(ctx, string(role), args, environ, stdio.Stderr)
	}
	cli := grammar(role)
	exitCode := -1
	parser, err := kong.New(cli,
		kong.Name("jq"),
		kong.Description(description(role)),
		kong.Vars{"version": buildinfo.Get().String(), "role": string(role)},
		kong.TypeMapper(reflect.TypeOf(time.Duration(0)), durationMapper()),
		kong.Writers(stdio.Stdout, stdio.Stderr),
		kong.Exit(func(code int) { exitCode = code }),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true, FlagsLast: true}),
		kong.Help(helpPrinter(role)),
		kong.Resolvers(envResolver(getenv)),
		globalGroup,
	)
	if err != nil {
		fmt.Fprintf(stdio.Stderr, "jq: internal error: %v\n", err)
		return ExitError
	}
	kctx, err := parser.Parse(args)
	if exitCode >= 0 { // --help or --version printed and asked to exit
		return exitCode
	}
	if err != nil {
		fmt.Fprintf(stdio.Stderr, "jq: %s\n", usageText(err))
		return ExitUsage
	}

	g := cli.(interface{ global() *globalFlags }).global()
	cfg, warnings, err := config.Load(config.LoadOptions{File: g.Config, Environ: environ, Flags: flagOverrides(cli),
		Production: func(c *config.Config) bool { return production(role, c) }})
	if err != nil {
		fmt.Fprintf(stdio.Stderr, "jq: %s\n", configErrorText(err))
		return ExitError
	}
	localDefaults(role, cfg)
	storeDefaults(role, cfg)
	if cfg.UI.Enabled == config.UIAuto && role != All { // the web console: auto serves it in --role=all only
		cfg.UI.Enabled = config.UIOff
	}
	if host := cfg.Worker.HostAccess(); role == All && len(host) > 0 && !cfg.AuthRequired() {
		// With authentication off every local account may submit, and the in-process worker would
		// run its jobs with this process's user, files, network and secrets: one rule for every
		// handler that reaches the host.
		fmt.Fprintf(stdio.Stderr, "jq: %s with authentication off: any local account could submit jobs that run programs, read files or send requests as this process's user; turn authentication on (auth.enabled true, auth.tokens, and token for the in-process worker) or run these handlers in workers of an authenticated server\n",
			strings.Join(host, ", "))
		return ExitError
	}
	if g.PrintConfig {
		red := cfg.Redacted()
		out, err := red.YAML()
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "jq: print config: %v\n", err)
			return ExitError
		}
		_, _ = stdio.Stdout.Write(out)
		return ExitOK
	}

	if role == Admin {
		return admin.Run(ctx, kctx, admin.Env{Config: cfg, Stdin: stdio.Stdin, Stdout: stdio.Stdout, Stderr: stdio.Stderr, Getenv: getenv})
	}

	log, err := telemetry.NewLogger(telemetry.LoggerOptions{
		Level: cfg.Logging.Level, Format: cfg.Logging.Format, Service: serviceName(role), Out: stdio.Stdout,
	})
	if err != nil {
		fmt.Fprintf(stdio.Stderr, "jq: %v\n", err)
		return ExitError
	}
	defer func() { _ = log.Sync() }()
	for _, w := range warnings {
		log.Warn("configuration warning", zap.String("detail", w))
	}

	if cfg.Server.DryRun {
		if role != Server && role != All {
			fmt.Fprintf(stdio.Stderr, "jq: --dry-run applies to --role=server or --role=all\n")
			return ExitUsage
		}
		return dryRun(ctx, cfg, stdio.Stdout)
	}

	if err := run(ctx, role, cfg, log, stdio.Stderr); err != nil {
		// One line on stderr for the person who started it; the same as a log record for the
		// collector of the logs, unless they go to the same terminal.
		if !term.IsTerminal(stdio.Stdout) {
			log.Error("exiting with error", zap.Error(err))
		}
		fmt.Fprintf(stdio.Stderr, "jq: %s\n", oneLine(err.Error()))
		return ExitError
	}
	return ExitOK
}

func serviceName(r Name) string {
	if r == All {
		return "jq"
	}
	return "jq-" + string(r)
}

// run starts the role's components and stops them in reverse (runGraph).
func run(ctx context.Context, role Name, cfg *config.Config, log *zap.Logger, banner io.Writer) error {
	rows, err := plan(roleTable, role, cfg)
	if err != nil {
		return err
	}
	lc := &lifecycle{}
	p := newProcess(ctx, cfg, log, lc)
	p.banner = banner
	return runGraph(ctx, rows, p, lc, log)
}

// envLookup reads from the environ slice given to Main, not from os.Getenv,
// so tests control the environment completely.
func envLookup(environ []string) func(string) string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return func(k string) string { return m[k] }
}

// envResolver feeds kong's `env:"…"` tags from the environ slice.
func envResolver(getenv func(string) string) kong.Resolver {
	return kong.ResolverFunc(func(_ *kong.Context, _ *kong.Path, flag *kong.Flag) (any, error) {
		for _, name := range flag.Envs {
			if v := getenv(name); v != "" {
				return v, nil
			}
		}
		return nil, nil
	})
}

func configErrorText(err error) string {
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	if len(lines) == 1 {
		return lines[0]
	}
	return "invalid configuration:\n  " + strings.Join(lines, "\n  ")
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// durationMapper decodes every duration flag: a Go duration ("90s", "10m", "1h30m") or a bare number of
// seconds ("600"), since the seeds give durations in seconds.
func durationMapper() kong.MapperFunc {
	return func(ctx *kong.DecodeContext, target reflect.Value) error {
		var s string
		if err := ctx.Scan.PopValueInto("duration", &s); err != nil {
			return err
		}
		d, err := parseDuration(s)
		if err != nil {
			return err
		}
		target.SetInt(int64(d))
		return nil
	}
}

func parseDuration(s string) (time.Duration, error) {
	if secs, err := strconv.ParseFloat(s, 64); err == nil {
		if secs < 0 || secs > float64(1<<63-1)/float64(time.Second) {
			return 0, fmt.Errorf("duration %q is out of range", s)
		}
		return time.Duration(secs * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration: want e.g. 600 (seconds), 90s, 10m or 1h30m", s)
	}
	return d, nil
}
