// Package archtest makes the layers of docs/architecture.md executable. Table holds one row for
// every package of the module: the project packages it may import, and which third-party modules.
// Any other edge fails the test, and so does a package without a row: a new package is placed in a
// layer on purpose. The layers, bottom up:
//
//	queue                      the domain: the standard library only
//	store                      interfaces over the domain
//	store/internal/sqlstore    what the two SQL stores share (the list query, the claim's steps): store and queue only
//	store/<backend>            one implementation each: store and queue only (the SQL ones also sqlstore), never each other
//	queue/<part>               engine, executor, outbox, maintenance: the domain and store's interfaces, no api
//	api/...                    wire format; the server side never reaches a backend, the client side never a store
//	roles/...                  the top; in package roles only wire.go names a concrete backend
//
// Extend the table by adding a row (or a package to a row) in the layer where the package belongs.
package archtest

// Module is the module path of jq.
const Module = "github.com/jq-dev/jq"

// Row says what the packages Pkgs may import. Paths are relative to the module; "x/..." is x and
// every package below it.
type Row struct {
	Pkgs []string
	// May lists the project packages the row's packages may import.
	May []string
	// Third lists the third-party module paths (prefixes) they may import; nil allows any third-party
	// module except the drivers, an empty slice allows the standard library only.
	Third []string
	// Drivers lists the database and broker drivers they may import (see Drivers).
	Drivers []string
	// Planned marks a row whose packages are on their way (another branch): it may match nothing.
	Planned bool
}

// Drivers are the clients of Postgres, SQLite, Redis and Kafka and the migration runner: only the backends,
// roles/wire.go and test infrastructure use them.
var Drivers = []string{
	"github.com/jackc/pgx",
	"github.com/redis/go-redis",
	"github.com/segmentio/kafka-go",
	"github.com/golang-migrate/migrate",
	"modernc.org/sqlite",
}

// Backends are the concrete store implementations: in package roles only wire.go imports them.
var Backends = []string{"store/postgres", "store/redis", "store/kafka", "store/sqlite", "store/memory", "migrations"}

// WireFile is the one file of package roles that may import Backends and Drivers.
const WireFile = "roles/wire.go"

var (
	stdOnly = []string{}
	// observe is what the inner layers may use beside the standard library: logs, traces, ids.
	observe = []string{"go.uber.org/zap", "go.opentelemetry.io/otel", "github.com/google/uuid"}
	pgx     = "github.com/jackc/pgx"
	goredis = "github.com/redis/go-redis"
	kafkago = "github.com/segmentio/kafka-go"
	migrate = "github.com/golang-migrate/migrate"
	msqlite = "modernc.org/sqlite"
	// leaf utilities that any layer above the domain may use.
	util = []string{"internal/buildinfo", "internal/ctxtime", "internal/health", "internal/hostcheck", "internal/netlimit", "internal/term", "internal/typo"}
	// apiClientSide is what talks to a server: the conversions, the generated stubs, the transport.
	apiClientSide = []string{"api", "api/apierr", "api/codec", "api/gen/...", "api/rpcclient", "queue"}
)

func with(a []string, b ...string) []string { return append(append([]string{}, a...), b...) }

// Table is the "may import" table of the module, one row per package or group of packages.
var Table = []Row{
	// The domain.
	{Pkgs: []string{"queue"}, Third: stdOnly},

	// Utilities: the domain at most.
	{Pkgs: []string{"internal/buildinfo", "internal/ctxtime", "internal/health", "internal/hostcheck", "internal/netlimit", "internal/typo"}, Third: stdOnly},
	{Pkgs: []string{"internal/term"}, Third: []string{"golang.org/x/term"}},
	{Pkgs: []string{"internal/jobtrace"}, May: []string{"queue"}, Third: observe},
	{Pkgs: []string{"internal/rpctrace"}, May: []string{"api/gen/..."}},
	// The domain's defaults (heartbeat, deadlines) are written once, in queue; declared schedules
	// are checked with the rules a server applies (queue/schedule).
	{Pkgs: []string{"config"}, May: []string{"queue", "queue/schedule", "internal/typo"}},

	// Store: interfaces over the domain; backends implement them and import nothing else of the
	// project (never each other, never the engine, never the API).
	{Pkgs: []string{"store"}, May: []string{"queue"}, Third: []string{"github.com/google/uuid"}},
	// The SQL stores' shared part: the domain and the contract, no driver (each store supplies its
	// dialect).
	{Pkgs: []string{"store/internal/sqlstore"}, May: []string{"store", "queue"}, Third: stdOnly},
	{Pkgs: []string{"store/postgres"}, May: []string{"store", "store/internal/sqlstore", "queue"}, Third: []string{"github.com/google/uuid"}, Drivers: []string{pgx}},
	{Pkgs: []string{"store/redis"}, May: []string{"store", "queue"}, Third: stdOnly, Drivers: []string{goredis}},
	{Pkgs: []string{"store/kafka"}, May: []string{"store", "queue"}, Third: stdOnly, Drivers: []string{kafkago}},
	{Pkgs: []string{"store/sqlite"}, May: []string{"store", "store/internal/sqlstore", "queue"}, Third: []string{"github.com/google/uuid", "github.com/gofrs/flock"}, Drivers: []string{msqlite}},
	{Pkgs: []string{"store/memory"}, May: []string{"store", "queue"}, Third: stdOnly},
	{Pkgs: []string{"migrations"}, Third: stdOnly, Drivers: []string{pgx, migrate}},
	{Pkgs: []string{"store/storetest"}, May: []string{"store", "store/internal/sqlstore", "queue", "internal/testenv"}},
	// The wrapper every store is reached through: validation, instruments, the tests' fault hook.
	{Pkgs: []string{"store/storewrap"}, May: []string{"store", "queue"}, Third: observe},

	// queue/*: the domain and the store interfaces; no API (the wire format is the API's business),
	// no backend. The executor reaches its server through executor.Conn only.
	// The rules of periodic jobs: the domain and the cron parser (robfig/cron), nothing else.
	{Pkgs: []string{"queue/schedule"}, May: []string{"queue"}, Third: []string{"github.com/robfig/cron"}},
	{Pkgs: []string{"queue/engine"}, May: []string{"queue", "queue/schedule", "store", "internal/jobtrace"}, Third: observe},
	{Pkgs: []string{"queue/executor"}, May: []string{"queue", "internal/ctxtime", "internal/jobtrace"}, Third: observe},
	{Pkgs: []string{"queue/executor/executortest"}, May: []string{"queue", "queue/executor"}, Third: stdOnly},
	// The worker protocol without a transport (--role=all): the executor's Conn over the engine.
	{Pkgs: []string{"queue/inproc"}, May: []string{"queue", "queue/engine", "queue/executor", "store"}},
	{Pkgs: []string{"queue/handlers"}, May: []string{"queue"}, Third: []string{"github.com/vmihailenco/msgpack"}},
	{Pkgs: []string{"queue/maintenance"}, May: []string{"queue", "store"}, Third: observe},
	{Pkgs: []string{"queue/outbox"}, May: []string{"queue", "store", "internal/ctxtime"}, Third: observe},

	// api: generated code, the domain ↔ protobuf conversions, and the two sides of the wire.
	{Pkgs: []string{"api/gen/..."}, May: []string{"api/gen/..."}},
	{Pkgs: []string{"api"}, May: []string{"api/gen/...", "queue", "store"}},
	{Pkgs: []string{"api/codec"}, May: []string{"queue"}},
	// The one table of errors on the wire: the server encodes with it, the clients decode with it.
	{Pkgs: []string{"api/apierr"}, May: []string{"queue"},
		Third: []string{"connectrpc.com/connect", "google.golang.org/genproto/googleapis/rpc", "google.golang.org/protobuf"}},
	{Pkgs: []string{"api/auth"}, May: []string{"api/apierr", "api/gen/...", "queue"}},
	{Pkgs: []string{"api/openapi"}},
	// The server side calls the engine and reads the store's interfaces; never a backend. The
	// taskqueue.v1 facade encodes the synthetic handler's payload (queue/handlers).
	{Pkgs: []string{"api/server"}, May: with(util, "api", "api/apierr", "api/auth", "api/codec", "api/gen/...", "queue", "queue/engine", "queue/schedule", "store",
		"queue/handlers", "internal/jobtrace", "internal/rpctrace")},
	// The web console is served beside the API and calls it like any client: no store, no engine.
	{Pkgs: []string{"api/console"}, May: with(util, "api", "api/auth", "api/codec", "api/gen/...", "api/rpcclient", "queue")},
	// The client side: the transport, and the worker's connection over it.
	{Pkgs: []string{"api/rpcclient"}, May: []string{"api/gen/...", "internal/rpctrace"}},
	{Pkgs: []string{"api/workerconn"}, May: []string{"api", "api/apierr", "api/gen/...", "api/rpcclient", "queue", "queue/executor"}},

	// The Go client of applications; jqpgx inserts inside the application's own pgx transaction, so
	// it is the one package outside roles that names a backend.
	{Pkgs: []string{"client"}, May: apiClientSide},
	{Pkgs: []string{"client/jqpgx"}, May: []string{"client", "api", "queue", "store", "store/postgres"}, Drivers: []string{pgx}},

	// roles: the top. Package roles wires everything (the backends in wire.go only); the role packages
	// each stay on their side of the API.
	{Pkgs: []string{"."}, May: []string{"roles"}},
	{Pkgs: []string{"roles"}, May: with(util, "api/...", "queue/...", "queue", "store", "config", "roles/...",
		"store/postgres", "store/redis", "store/kafka", "store/sqlite", "store/memory", "store/storewrap", "migrations"),
		Drivers: Drivers},
	{Pkgs: []string{"roles/serverrole"}, May: with(util, "api/...", "queue", "queue/engine", "queue/maintenance",
		"queue/outbox", "store", "config", "roles/telemetry", "internal/jobtrace")},
	{Pkgs: []string{"roles/worker"}, May: with(util, "queue", "queue/executor", "queue/handlers", "api/rpcclient", "api/workerconn",
		"config", "roles/telemetry")},
	{Pkgs: []string{"roles/admin"}, May: with(util, with(apiClientSide, "api/auth", "client", "config")...)},
	// The producer's span per scan batch links the jobs' trace contexts (internal/jobtrace).
	{Pkgs: []string{"roles/producer"}, May: with(util, with(apiClientSide, "api/auth", "client", "config", "internal/jobtrace")...)},
	{Pkgs: []string{"roles/healthcheck"}, May: []string{"config"}},
	{Pkgs: []string{"roles/telemetry"}, May: with(util, "api/auth", "config", "queue", "queue/engine", "queue/executor",
		"queue/maintenance", "queue/outbox", "store")},

	// Examples use what an application can: the client side, the domain, the worker runtime.
	{Pkgs: []string{"examples/..."}, May: with(apiClientSide, "api/workerconn", "client", "client/jqpgx", "queue/executor",
		"queue/handlers")},

	// Test infrastructure and tools.
	{Pkgs: []string{"internal/testenv"}, Drivers: []string{pgx, goredis}},
	{Pkgs: []string{"internal/testenv/stores"}, May: []string{"internal/testenv", "migrations", "store", "store/postgres", "store/redis",
		"store/storewrap"}, Drivers: []string{pgx, goredis}},
	{Pkgs: []string{"internal/testenv/jqserver"}, May: []string{"internal/testenv", "roles"}},
	// The binary-level tests (test/...) build and run the jq binary; only their harness has
	// non-test files beyond a package comment.
	{Pkgs: []string{"test/e2e", "test/faults", "test/docs"}, Third: stdOnly},
	{Pkgs: []string{"test/internal/jqbin"}, May: []string{"internal/testenv"}, Third: []string{"github.com/stretchr/testify"}},
	{Pkgs: []string{"internal/kafkatest"}, May: []string{"api/gen/..."}},
	{Pkgs: []string{"internal/faultcheck"}, May: []string{"queue"}},
	// The evaluation's load goes through the taskqueue.v1 facade and checks the synthetic handler's output.
	{Pkgs: []string{"internal/eval"}, May: []string{"client", "api/gen/...", "queue/handlers"}},
	{Pkgs: []string{"internal/archtest", "internal/deploytest"}, Third: stdOnly},
	// The worker conformance suite drives worker programs (its Go one is the executor) against a real
	// server, and checks each scenario from the server's event log through the API.
	{Pkgs: []string{"internal/conformance"}, May: with(apiClientSide, "internal/testenv")},
	{Pkgs: []string{"internal/conformance/goworker"}, May: with(apiClientSide, "api/workerconn", "queue/executor")},
}
