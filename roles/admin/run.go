package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"connectrpc.com/connect"
	"github.com/alecthomas/kong"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/jq-dev/jq/api/client"
	"github.com/jq-dev/jq/config"
)

// Exit codes of admin commands (documented in --help).
const (
	exitOK       = 0
	exitError    = 1
	exitNotFound = 3
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
}

// Run executes the command kong selected and maps its error to an exit code:
// one line on stderr, 3 when something was not found, 1 otherwise.
func Run(ctx context.Context, kctx *kong.Context, env Env) int {
	g := findGlobals(kctx)
	re := &runEnv{Env: env, ctx: ctx, globals: g, command: kctx.Command()}
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
	if connect.CodeOf(err) == connect.CodeNotFound {
		return exitNotFound
	}
	return exitError
}

func findGlobals(kctx *kong.Context) *Globals {
	if c, ok := kctx.Model.Target.Addr().Interface().(interface{ globals() *Globals }); ok {
		return c.globals()
	}
	return &Globals{}
}

func (c *Commands) globals() *Globals { return &c.Globals }

// Client dials lazily, so commands that need no server never touch one.
func (re *runEnv) Client() (*client.Client, error) {
	if re.client != nil {
		return re.client, nil
	}
	c, err := client.New(client.Options{
		Addr:     re.globals.ServerAddr,
		CAFile:   re.globals.TLSCA,
		CertFile: re.globals.TLSCert,
		KeyFile:  re.globals.TLSKey,
	})
	if err != nil {
		return nil, err
	}
	re.client = c
	return c, nil
}

// callCtx bounds one request by --timeout (NFR-004).
func (re *runEnv) callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(re.ctx, re.globals.Timeout)
}

// errorLine renders an error as the one line an operator reads.
func errorLine(err error, g *Globals) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		switch ce.Code() {
		case connect.CodeDeadlineExceeded:
			return fmt.Sprintf("no answer from %s within %s (raise --timeout, or check the server)", g.ServerAddr, g.Timeout)
		case connect.CodeUnavailable:
			return fmt.Sprintf("cannot reach the jq server at %s: %s", g.ServerAddr, firstLine(ce.Message()))
		case connect.CodeUnimplemented:
			return fmt.Sprintf("the server at %s does not implement this yet: %s", g.ServerAddr, firstLine(ce.Message()))
		}
		if msg := ce.Message(); msg != "" {
			return firstLine(msg)
		}
	}
	return firstLine(err.Error())
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// printMessage writes m as JSON or YAML (protojson field names, every field),
// or calls table for the human format.
func (re *runEnv) printMessage(m proto.Message, table func(io.Writer) error) error {
	switch re.globals.Output {
	case "json", "yaml":
		b, err := protojson.MarshalOptions{Multiline: true, Indent: "  ", EmitUnpopulated: true, UseProtoNames: true}.Marshal(m)
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
