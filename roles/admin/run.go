package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/alecthomas/kong"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/jq-dev/jq/api/apierr"
	"github.com/jq-dev/jq/api/codec"
	"github.com/jq-dev/jq/api/rpcclient"
	"github.com/jq-dev/jq/client"
	"github.com/jq-dev/jq/config"
	"github.com/jq-dev/jq/queue"
)

// Exit codes of admin commands (documented in --help and the README).
const (
	exitOK       = 0
	exitError    = 1 // anything else: unreachable server, timeout, refused action, unhealthy status
	exitUsage    = 2 // bad flags or arguments, found here or refused by the server as INVALID_ARGUMENT
	exitNotFound = 3 // the job, queue or worker named does not exist
)

// Env is what an admin command runs with.
type Env struct {
	Config *config.Config
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
}

// runEnv is bound into every command's Run method.
type runEnv struct {
	Env
	ctx     context.Context
	globals *Globals
	client  *client.Client
	command string // e.g. "job cancel <id>"
	now     func() time.Time
	color   bool // ANSI colour in tables: only on a terminal, never with NO_COLOR or TERM=dumb
}

// Run executes the command kong selected and maps its error to an exit code:
// one line on stderr; 3 when something was not found, 2 for a usage error, 1
// otherwise.
func Run(ctx context.Context, kctx *kong.Context, env Env) int {
	g := findGlobals(kctx)
	if env.Getenv == nil {
		env.Getenv = func(string) string { return "" }
	}
	re := &runEnv{Env: env, ctx: ctx, globals: g, command: kctx.Command(), now: time.Now,
		color: colorWanted(env.Stdout, env.Getenv)}
	defer func() {
		if re.client != nil {
			re.client.Close()
		}
	}()
	err := kctx.Run(re)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(env.Stderr, "jq: %s\n", errorLine(err, g))
	return exitCode(err)
}

// exitCode is the exit status of a command that failed with err.
func exitCode(err error) int {
	var ue *usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	var nf *notFoundError
	if errors.As(err, &nf) {
		return exitNotFound
	}
	for _, s := range notFound {
		if errors.Is(err, s) {
			return exitNotFound
		}
	}
	if errors.Is(err, queue.ErrInvalidArgument) {
		return exitUsage
	}
	return exitError
}

// notFound are the sentinels of a missing thing, by the kind of thing: the server's reason names one
// (api/apierr), and the client's errors match it.
var notFound = map[string]error{
	"job":        queue.ErrJobNotFound,
	"queue":      queue.ErrQueueNotFound,
	"schedule":   queue.ErrScheduleNotFound,
	"constraint": queue.ErrConstraintNotFound,
	"worker":     queue.ErrWorkerNotFound,
}

// usageError is a bad flag or argument found before calling the server.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// notFoundError names what does not exist and what to do next, e.g. `queue "emails" not found
// (jq queue list shows the queues)`.
type notFoundError struct {
	what, name string
	hint       string
	err        error
}

func (e *notFoundError) Error() string {
	s := fmt.Sprintf("%s %q not found", e.what, e.name)
	if e.hint != "" && e.hint[0] != ';' {
		s += " "
	}
	s += e.hint
	return s
}
func (e *notFoundError) Unwrap() error { return e.err }

// listHint is where to find the names of each kind of thing.
var listHint = map[string]string{
	"job":        "(jq job list shows recent jobs)",
	"queue":      "(jq queue list shows the queues)",
	"schedule":   "(jq schedule list shows the schedules)",
	"constraint": "(jq constraint list shows the constraints)",
	"worker":     "(jq worker list shows the workers)",
}

// named turns the server's "no such <what>" into an error naming the missing thing and where to find
// the existing ones, and leaves other errors alone: a missing queue is not reported as a missing job
// because both are NOT_FOUND.
func named(err error, what, name string) error {
	if err != nil && errors.Is(err, notFound[what]) {
		return &notFoundError{what: what, name: name, hint: listHint[what], err: err}
	}
	return err
}

// namedQueueToUse is named for a queue that a command puts work into: the way on is to create it.
func namedQueueToUse(err error, queue string) error {
	err = named(err, "queue", queue)
	if nf, ok := errors.AsType[*notFoundError](err); ok {
		nf.hint = fmt.Sprintf("; create it with: jq queue create %s (jq queue list shows the queues)", shellWord(queue))
	}
	return err
}

// shellWord quotes s for a command line to paste when it holds anything but a plain name.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func findGlobals(kctx *kong.Context) *Globals {
	if c, ok := kctx.Model.Target.Addr().Interface().(interface{ globals() *Globals }); ok {
		return c.globals()
	}
	return &Globals{}
}

func (c *Commands) globals() *Globals { return &c.Globals }

// Client is the Go client of the server named by the global flags, built on first use: commands
// that need no server never build one, and a bad flag is reported before a bad token file. It does
// not dial until the first call.
func (re *runEnv) Client() (*client.Client, error) {
	if re.client != nil {
		return re.client, nil
	}
	token := re.globals.Token
	if re.globals.TokenFile != "" {
		if token != "" {
			return nil, usagef("give --token (JQ_TOKEN) or --token-file (JQ_TOKEN_FILE), not both")
		}
		t, err := rpcclient.ReadTokenFile(re.globals.TokenFile)
		if err != nil {
			return nil, usagef("%v", err)
		}
		token = t
	}
	c, err := client.New(client.Options{
		Addr:     re.globals.ServerAddr,
		CAFile:   re.globals.TLSCA,
		CertFile: re.globals.TLSCert,
		KeyFile:  re.globals.TLSKey,
		Token:    token,
	})
	if err != nil {
		return nil, err
	}
	re.client = c
	return c, nil
}

// callCtx bounds one request by --timeout (NFR-004); a job wait has --wait-timeout instead.
func (re *runEnv) callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(re.ctx, re.globals.Timeout)
}

// errorLine renders an error as the one line an operator reads.
func errorLine(err error, g *Globals) string {
	return cell(errorText(err, g))
}

// errorText is errorLine before escaping.
func errorText(err error, g *Globals) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		msg := firstLine(ce.Message())
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			return fmt.Sprintf("no answer from %s within %s (raise --timeout, or check the server)", g.ServerAddr, g.Timeout)
		case errors.Is(err, client.ErrUnavailable):
			if connect.IsWireError(ce) { // the server answered: a dependency of its is down
				return fmt.Sprintf("the jq server at %s is unavailable: %s", g.ServerAddr, msg)
			}
			return fmt.Sprintf("cannot reach the jq server at %s: %s", g.ServerAddr, msg)
		case errors.Is(err, queue.ErrUnauthenticated):
			if g.Token == "" && g.TokenFile == "" && g.TLSCert == "" {
				return "the server requires a token (set JQ_TOKEN or --token-file) or a client certificate (--tls-cert, --tls-key)"
			}
			return fmt.Sprintf("the server did not accept these credentials: %s", msg)
		case errors.Is(err, queue.ErrPermissionDenied):
			return fmt.Sprintf("permission denied: %s", msg)
		case isServerLimit(err):
			return fmt.Sprintf("refused by a server limit: %s", msg)
		case ce.Code() == connect.CodeUnimplemented: // connect's own answer for a method an older server lacks: no reason of jq's
			return fmt.Sprintf("the server at %s does not implement this yet: %s", g.ServerAddr, msg)
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer from %s within %s (raise --timeout, or check the server)", g.ServerAddr, g.Timeout)
	}
	return firstLine(serverMessage(err))
}

// isServerLimit says whether err is a refusal by one of the server's limits (api/apierr).
func isServerLimit(err error) bool {
	for _, s := range []error{queue.ErrLimitReached, apierr.ErrRateLimited, apierr.ErrStreamLimit, apierr.ErrPagesBusy} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// serverMessage is err's text, with a connect error, or the Go client's error
// around one, reduced to the server's message (without the "not_found: " code
// prefix or the client's "cancel job: ").
func serverMessage(err error) string {
	var ce *connect.Error
	switch e := err.(type) { //nolint:errorlint // only the outermost error is reduced
	case *connect.Error:
		ce = e
	case *client.Error:
		ce = e.Err
	}
	if ce != nil && ce.Message() != "" {
		return ce.Message()
	}
	return err.Error()
}

// refusal words the server's INVALID_ARGUMENT for a thing the command names already (the
// server's text does not name it again): without the error class, which the exit code carries.
func refusal(err error) error {
	if !errors.Is(err, queue.ErrInvalidArgument) {
		return err
	}
	return reworded(err, strings.TrimPrefix(serverMessage(err), queue.ErrInvalidArgument.Error()+": "))
}

// reworded is the server's error err with the message msg: same code, same sentinels.
func reworded(err error, msg string) error {
	ce := connect.NewError(connect.CodeOf(err), errors.New(msg))
	if e, ok := errors.AsType[*client.Error](err); ok {
		return &client.Error{Op: e.Op, Sentinel: e.Sentinel, Err: ce}
	}
	return ce
}

// actionError says what was being done when the server refused it.
type actionError struct {
	action string
	err    error
}

func (e *actionError) Error() string { return e.action + ": " + serverMessage(e.err) }
func (e *actionError) Unwrap() error { return e.err }

// failed prefixes err (unless nil, or already naming a missing thing) with
// the action.
func failed(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	var nf *notFoundError
	if errors.As(err, &nf) {
		return err
	}
	return &actionError{action: fmt.Sprintf(format, args...), err: err}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// printMessage writes m as JSON or YAML (protojson field names, every field; payloads and results
// that are JSON as JSON values, codec.MarshalJSON),
// or calls table for the human format.
func (re *runEnv) printMessage(m proto.Message, table func(io.Writer) error) error {
	switch re.globals.Output {
	case "json", "yaml":
		b, err := codec.MarshalJSON(protojson.MarshalOptions{Multiline: true, Indent: "  ", EmitUnpopulated: true, UseProtoNames: true}, m)
		if err != nil {
			return err
		}
		if re.globals.Output == "json" {
			_, err = fmt.Fprintln(re.Stdout, string(b))
			return err
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		y, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = re.Stdout.Write(y)
		return err
	default:
		return table(re.Stdout)
	}
}
