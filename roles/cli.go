package roles

import (
	"fmt"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/jq-dev/jq/roles/admin"
)

// Name is a process role (--role): which components one jq process runs. (What a caller of the
// API may do is an auth.Role.)
type Name string

// The process roles.
const (
	Server   Name = "server"
	Worker   Name = "worker"
	Producer Name = "producer"
	Admin    Name = "admin"
	All      Name = "all"
)

// allNames is in the order --help lists them.
var allNames = []Name{Server, Worker, Producer, Admin, All}

// ParseName accepts one of the role names.
func ParseName(s string) (Name, error) {
	for _, r := range allNames {
		if string(r) == s {
			return r, nil
		}
	}
	names := make([]string, len(allNames))
	for i, r := range allNames {
		names[i] = string(r)
	}
	if c := closest(s, names); c != "" {
		return "", fmt.Errorf("unknown role %q (did you mean %q? want server, worker, producer, admin or all)", s, c)
	}
	return "", fmt.Errorf("unknown role %q (want server, worker, producer, admin or all)", s)
}

// roleFromArgs finds --role before kong parses, because the role decides which
// grammar (and which --help) applies. Precedence: flag > JQ_ROLE > "all".
func roleFromArgs(args []string, getenv func(string) string) (Name, error) {
	val, found := "", false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if v, ok := strings.CutPrefix(a, "--role="); ok {
			val, found = v, true
			continue
		}
		if a == "--role" {
			rest := args[i+1:]
			if len(rest) == 0 {
				return "", fmt.Errorf("--role needs a value (server, worker, producer, admin or all)")
			}
			val, found = rest[0], true
			i++
		}
	}
	if !found {
		val = getenv("JQ_ROLE")
	}
	if val == "" {
		// `jq job submit …`: an operator command names its role.
		if first := firstArg(args); adminCommands[first] {
			return Admin, nil
		}
		return All, nil
	}
	return ParseName(val)
}

// adminCommands are the top-level commands of --role=admin: a command line that starts with one
// (and says no --role) is an admin command line. Read from the grammar (admin.Commands), so a new
// command is one at once: a hand-kept list once missed `schedule`.
var adminCommands = func() map[string]bool {
	m := map[string]bool{}
	for _, c := range operatorCommands() {
		m[c.name] = true
	}
	return m
}()

// valueFlags are the flags (global ones, the admin role's and the other roles' own) that take their
// value as the next argument when written without "=": `jq --role=all --scan-dir ./data` has no
// first argument, ./data is a directory, not a filter for the JSON processor.
var valueFlags = map[string]bool{
	"--role": true, "--config": true, "--log-level": true, "--log-format": true, "--server-addr": true,
	"--tls-cert": true, "--tls-key": true, "--tls-ca": true, "--token": true, "--token-file": true,
	"--output": true, "-o": true, "--timeout": true,
	"--grpc-port": true, "--metrics-port": true, "--health-port": true, "--worker-id": true, "--concurrency": true,
	"--queues": true, "--worker-metrics-port": true, "--worker-health-port": true, "--scan-dir": true, "--queue": true,
	"--ui-port": true, "--port-offset": true, "--data-dir": true,
}

// firstArg is the first argument that is not a flag (or a flag's separate value), "" if none.
func firstArg(args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			if i+1 < len(args) {
				return args[i+1]
			}
			return ""
		case valueFlags[a]:
			i++ // the flag's value
		case strings.HasPrefix(a, "-"):
		default:
			return a
		}
	}
	return ""
}

// looksLikeJSONFilter reports whether arg is what someone expecting the JSON processor of the same
// name would type first: a filter such as ".", ".a", ".[0]" or "{a: .b}".
func looksLikeJSONFilter(arg string) bool {
	return strings.HasPrefix(arg, ".") || strings.HasPrefix(arg, "{") || strings.HasPrefix(arg, "[") ||
		strings.Contains(arg, "|")
}

// globalFlags are accepted by every role.
type globalFlags struct {
	Role        string           `help:"What this process runs: server, worker, producer, admin or all (server + worker, + producer with producer.scan_dir, in one process). Without it, a command line starting with an operator command (job, queue, status, …) is admin; otherwise all." enum:"server,worker,producer,admin,all" default:"${role}" env:"JQ_ROLE"`
	Config      string           `help:"Path to the YAML configuration file (see examples/config.yaml). Every key can also be set with a JQ_ environment variable, e.g. JQ_DB_PASSWORD for db.password." type:"path" placeholder:"PATH" env:"JQ_CONFIG"`
	LogLevel    *string          `help:"Log level: trace, debug, info, warn or error (logging.level, default info)." placeholder:"LEVEL"`
	LogFormat   *string          `help:"Log format: json or text (logging.format, default json)." placeholder:"FORMAT"`
	PrintConfig bool             `help:"Print the merged configuration (defaults < file < JQ_ env < flags) with secrets redacted, and exit."`
	Version     kong.VersionFlag `help:"Print the version and build commit, and exit."`
}

func (g *globalFlags) overrides(m map[string]any) {
	setIf(m, "logging.level", g.LogLevel)
	setIf(m, "logging.format", g.LogFormat)
}

// serverFlags are seed 002's jq-server flags.
type serverFlags struct {
	GRPCPort    *int    `name:"grpc-port" help:"API listen port: gRPC, gRPC-Web and Connect on one port (grpc.port, default 50051)." placeholder:"PORT"`
	MetricsPort *int    `help:"Prometheus /metrics port of the server (metrics.port, default 9090), on metrics.host (JQ_METRICS_HOST, default 127.0.0.1)." placeholder:"PORT"`
	HealthPort  *int    `help:"/healthz and /readyz port of the server (health.port, default 8080), on health.host (JQ_HEALTH_HOST, default 127.0.0.1)." placeholder:"PORT"`
	UIPort      *int    `name:"ui-port" help:"Web console port (ui.port, default 8088), on grpc.host; served by --role=all, and by --role=server with ui.enabled." placeholder:"PORT"`
	DryRun      bool    `help:"Validate the configuration, check that Postgres, Redis and Kafka are reachable, print a summary and exit (0 when all pass, 1 otherwise)."`
	DataDir     *string `help:"Directory of the embedded store (store.data_dir, default jq-data): its database jq.db. Used when store.driver is sqlite, or auto in --role=all with no database configured." placeholder:"DIR" type:"path"`
}

func (s *serverFlags) overrides(m map[string]any) {
	setIf(m, "grpc.port", s.GRPCPort)
	setIf(m, "metrics.port", s.MetricsPort)
	setIf(m, "health.port", s.HealthPort)
	setIf(m, "ui.port", s.UIPort)
	setIf(m, "store.data_dir", s.DataDir)
	if s.DryRun {
		m["server.dry_run"] = true
	}
}

// workerIdentityFlags are shared by --role=worker and --role=all.
type workerIdentityFlags struct {
	WorkerID    *string   `help:"Unique worker id (worker.id, default <hostname>-<pid>-<random>)." placeholder:"ID"`
	Concurrency *int      `help:"Most jobs this worker runs at once (worker.concurrency, default 4)." placeholder:"N"`
	Queues      *[]string `help:"Comma-separated queues to take jobs from (worker.queues, default default)." placeholder:"Q1,Q2"`
}

func (w *workerIdentityFlags) overrides(m map[string]any) {
	setIf(m, "worker.id", w.WorkerID)
	setIf(m, "worker.concurrency", w.Concurrency)
	setIf(m, "worker.queues", w.Queues)
}

// workerFlags are seed 002's jq-worker flags.
type workerFlags struct {
	ServerAddr *string `help:"Address of the jq server's API, or several replicas comma-separated, tried in order when (re)connecting (worker.server_addr, default localhost:50051)." placeholder:"HOST:PORT[,HOST:PORT…]"`
	workerIdentityFlags
	MetricsPort *int    `help:"Prometheus /metrics port of the worker (worker.metrics_port, default 9091), on worker.bind_host (JQ_WORKER_BIND_HOST, default 127.0.0.1)." placeholder:"PORT"`
	HealthPort  *int    `help:"/healthz and /readyz port of the worker (worker.health_port, default 8081), on worker.bind_host (default 127.0.0.1)." placeholder:"PORT"`
	TokenFile   *string `help:"File holding the API token the worker presents to the server (token_file; or set JQ_TOKEN)." placeholder:"PATH"`
}

func (w *workerFlags) overrides(m map[string]any) {
	setIf(m, "worker.server_addr", w.ServerAddr)
	setIf(m, "token_file", w.TokenFile)
	w.workerIdentityFlags.overrides(m)
	setIf(m, "worker.metrics_port", w.MetricsPort)
	setIf(m, "worker.health_port", w.HealthPort)
}

// portFlags are the flags of every role that listens.
type portFlags struct {
	PortOffset *int `help:"Added to every port this process listens on (port_offset, default 0): --port-offset 100 runs a second instance beside the first (API 50151, health 8180, console 8188, …)." placeholder:"N"`
}

func (p *portFlags) overrides(m map[string]any) {
	setIf(m, "port_offset", p.PortOffset)
}

// ServerCLI is the grammar of --role=server.
type ServerCLI struct {
	globalFlags `group:"global"`
	serverFlags
	portFlags
}

// WorkerCLI is the grammar of --role=worker.
type WorkerCLI struct {
	globalFlags `group:"global"`
	workerFlags
	portFlags
}

// AllCLI is the grammar of --role=all: the server's flags plus the worker's
// identity; the in-process worker's own ports are --worker-metrics-port and
// --worker-health-port so they cannot clash with the server's.
type AllCLI struct {
	globalFlags `group:"global"`
	serverFlags
	workerIdentityFlags
	WorkerMetricsPort *int    `help:"Prometheus /metrics port of the in-process worker (worker.metrics_port, default 9091)." placeholder:"PORT"`
	WorkerHealthPort  *int    `help:"/healthz and /readyz port of the in-process worker (worker.health_port, default 8081)." placeholder:"PORT"`
	ScanDir           *string `help:"Also run the producer on this directory (producer.scan_dir; see --role=producer --help)." placeholder:"DIR"`
	portFlags
}

// ProducerCLI is the grammar of --role=producer.
type ProducerCLI struct {
	globalFlags `group:"global"`
	ServerAddr  *string `help:"Address of the jq server's API, or several replicas comma-separated (producer.server_addr, default localhost:50051)." placeholder:"HOST:PORT[,HOST:PORT…]"`
	ScanDir     *string `help:"Directory to scan recursively; one job per file version (producer.scan_dir, required)." placeholder:"DIR"`
	Queue       *string `help:"Queue of the jobs; it must exist (producer.queue, default default)." placeholder:"QUEUE"`
	Once        bool    `help:"Scan once, submit, and exit: 0 when every file was handled, 1 on an error (producer.once). Without it the producer re-scans every producer.scan_interval_s."`
	MetricsPort *int    `help:"Prometheus /metrics port in watch mode; 0 = none (producer.metrics_port, default 9092)." placeholder:"PORT"`
	TokenFile   *string `help:"File holding the API token the producer presents to the server (token_file; or set JQ_TOKEN)." placeholder:"PATH"`
	portFlags
}

func (p *ProducerCLI) overrides(m map[string]any) {
	setIf(m, "producer.server_addr", p.ServerAddr)
	setIf(m, "producer.scan_dir", p.ScanDir)
	setIf(m, "producer.queue", p.Queue)
	setIf(m, "producer.metrics_port", p.MetricsPort)
	setIf(m, "token_file", p.TokenFile)
	if p.Once {
		m["producer.once"] = true
	}
}

// AdminCLI is the grammar of --role=admin: jq-ctl's command tree.
type AdminCLI struct {
	globalFlags `group:"global"`
	admin.Commands
}

// flagOverrides turns the flags the user set into config key paths; it is the
// top layer of the configuration (flags > env > file > defaults).
func flagOverrides(cli any) map[string]any {
	m := map[string]any{}
	switch c := cli.(type) {
	case *ServerCLI:
		c.globalFlags.overrides(m)
		c.serverFlags.overrides(m)
		c.portFlags.overrides(m)
	case *WorkerCLI:
		c.globalFlags.overrides(m)
		c.workerFlags.overrides(m)
		c.portFlags.overrides(m)
	case *AllCLI:
		c.globalFlags.overrides(m)
		c.serverFlags.overrides(m)
		c.portFlags.overrides(m)
		c.workerIdentityFlags.overrides(m)
		setIf(m, "worker.metrics_port", c.WorkerMetricsPort)
		setIf(m, "worker.health_port", c.WorkerHealthPort)
		setIf(m, "producer.scan_dir", c.ScanDir)
	case *ProducerCLI:
		c.globalFlags.overrides(m)
		c.overrides(m)
		c.portFlags.overrides(m)
	case *AdminCLI:
		c.globalFlags.overrides(m)
	}
	return m
}

func setIf[T any](m map[string]any, key string, v *T) {
	if v != nil {
		m[key] = *v
	}
}

func (g *globalFlags) global() *globalFlags { return g }

// grammar returns the kong grammar for a role.
func grammar(r Name) any {
	switch r {
	case Server:
		return &ServerCLI{}
	case Worker:
		return &WorkerCLI{}
	case Producer:
		return &ProducerCLI{}
	case Admin:
		return &AdminCLI{Commands: admin.Commands{Events: admin.EventsCmd{Tail: admin.EventsTailCmd{OpenKafka: openEventTail}}}}
	default:
		return &AllCLI{}
	}
}

var roleDescriptions = map[Name]string{
	Server:   "the API (gRPC, gRPC-Web, Connect), scheduler, reaper, outbox relay and maintenance",
	Worker:   "registers with a server, receives jobs over a stream and runs their handlers",
	Producer: "scans a directory and submits one job per file",
	Admin:    "operator commands that talk to a server through its API",
	All:      "server and worker in one process (and the producer when producer.scan_dir is set); with no database configured on the embedded store in ./jq-data (store.driver, --data-dir)",
}

func description(r Name) string {
	var b strings.Builder
	b.WriteString("jq is a distributed job queue: Postgres is the system of record, Redis carries dispatch, Kafka receives every lifecycle event; or, in one process with nothing installed, an embedded SQLite file with in-process dispatch (docs/embedded.md).\n\n")
	fmt.Fprintf(&b, "This is --role=%s: %s.\n\nRoles (select with --role or JQ_ROLE; `jq --role=<role> --help` shows that role's flags and commands):\n", r, roleDescriptions[r])
	for _, x := range allNames {
		fmt.Fprintf(&b, "  %-9s %s\n", x, roleDescriptions[x])
	}
	b.WriteString("\nConfiguration precedence: flags > JQ_ environment variables > --config file > defaults.")
	if r != Admin {
		b.WriteString(operatorHelp())
	}
	// Every page but the admin role's lists the operator commands too, and they exit 3 for a
	// job, queue, worker, schedule or constraint that does not exist.
	b.WriteString("\n\nExit codes: 0 ok, 1 error, 2 usage, 3 not found (operator commands).")
	return b.String()
}
