package admin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/alecthomas/kong"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jq-dev/jq/api/apierr"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
	"github.com/jq-dev/jq/queue"
)

// parseCreate reads `constraint create` arguments as the CLI does.
func parseCreate(t *testing.T, args ...string) *ConstraintCreateCmd {
	t.Helper()
	var cli Commands
	p, err := kong.New(&cli)
	require.NoError(t, err)
	_, err = p.Parse(append([]string{"constraint", "create"}, args...))
	require.NoError(t, err)
	return &cli.Constraint.Create
}

func TestConstraintCreateFlags(t *testing.T) {
	t.Parallel()
	c := parseCreate(t, "email-per-tenant", "--match", "type=email.*", "--match", "queue=q", "--match", "label:tenant=acme",
		"--match", "label:tier=a=b", "--key", "{{.labels.tenant}}", "--concurrency", "5", "--rate", "100/m", "--replace")
	req, err := c.request()
	require.NoError(t, err)
	want := &jqv1.CreateConstraintRequest{
		Name:        "email-per-tenant",
		Match:       &jqv1.JobMatcher{Queue: "q", Type: "email.*", Labels: map[string]string{"tenant": "acme", "tier": "a=b"}},
		Key:         "{{.labels.tenant}}",
		Concurrency: 5,
		Rate:        &jqv1.RateLimit{Limit: 100, Interval: durationpb.New(time.Minute)},
		Replace:     true,
	}
	require.True(t, proto.Equal(want, req), "got %v", req)

	req, err = parseCreate(t, "r", "--rate", "10/5s,burst=30").request()
	require.NoError(t, err)
	require.True(t, proto.Equal(&jqv1.RateLimit{Limit: 10, Interval: durationpb.New(5 * time.Second), Burst: 30}, req.GetRate()))
	require.Empty(t, req.GetMatch().GetLabels())
	req, err = parseCreate(t, "r", "--rate", "10/s,burst=30", "--burst", "2").request()
	require.NoError(t, err)
	require.EqualValues(t, 2, req.GetRate().GetBurst(), "--burst wins")

	for args, want := range map[string]string{
		"--match queue":                       `--match "queue": want queue=NAME`,
		"--match color=red":                   `--match "color=red"`,
		"--match label:=x":                    `--match "label:=x"`,
		"--match queue=a --match queue=b":     "--match queue= given twice",
		"--match label:t=a --match label:t=b": "--match label:t= given twice",
		"--rate 100":                          `--rate "100": want N/s`,
		"--rate 0/s":                          "rate limit 0",
		"--rate 5/1ns":                        "rate interval",
		"--burst 3":                           "--burst applies to --rate only",
		"--rate 1/s --burst=-1":               "--burst -1",
		"--concurrency=-1":                    "--concurrency -1",
	} {
		_, err := parseCreate(t, append([]string{"c"}, strings.Fields(args)...)...).request()
		require.Equal(t, exitUsage, exitCode(err), args)
		require.Contains(t, err.Error(), want, args)
		require.NotContains(t, err.Error(), "\n", args)
	}
}

// fakeConstraints answers the ConstraintService with fixed records or an error.
type fakeConstraints struct {
	jqv1connect.UnimplementedConstraintServiceHandler
	err  error
	got  proto.Message // the last request
	con  *jqv1.Constraint
	use  *jqv1.ConstraintUsage
	list []*jqv1.ConstraintSummary
}

func (f *fakeConstraints) CreateConstraint(_ context.Context, r *connect.Request[jqv1.CreateConstraintRequest]) (*connect.Response[jqv1.CreateConstraintResponse], error) {
	f.got = r.Msg
	if f.err != nil {
		return nil, f.err
	}
	return connect.NewResponse(&jqv1.CreateConstraintResponse{Constraint: f.con}), nil
}

func (f *fakeConstraints) ListConstraints(context.Context, *connect.Request[jqv1.ListConstraintsRequest]) (*connect.Response[jqv1.ListConstraintsResponse], error) {
	if f.err != nil {
		return nil, f.err
	}
	return connect.NewResponse(&jqv1.ListConstraintsResponse{Constraints: f.list}), nil
}

func (f *fakeConstraints) GetConstraint(_ context.Context, r *connect.Request[jqv1.GetConstraintRequest]) (*connect.Response[jqv1.GetConstraintResponse], error) {
	f.got = r.Msg
	if f.err != nil {
		return nil, f.err
	}
	return connect.NewResponse(&jqv1.GetConstraintResponse{Constraint: f.con, Usage: f.use}), nil
}

func (f *fakeConstraints) DeleteConstraint(_ context.Context, r *connect.Request[jqv1.DeleteConstraintRequest]) (*connect.Response[jqv1.DeleteConstraintResponse], error) {
	f.got = r.Msg
	if f.err != nil {
		return nil, f.err
	}
	return connect.NewResponse(&jqv1.DeleteConstraintResponse{}), nil
}

func serveConstraints(t *testing.T, f *fakeConstraints, output string) (*runEnv, *syncBuffer) {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(jqv1connect.NewConstraintServiceHandler(f))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	re, out, _ := testEnv(context.Background(), output)
	re.globals.ServerAddr = strings.TrimPrefix(srv.URL, "http://")
	t.Cleanup(func() {
		if re.client != nil {
			re.client.Close()
		}
	})
	return re, out
}

func sampleConstraint() (*jqv1.Constraint, *jqv1.ConstraintUsage) {
	c := &jqv1.Constraint{
		Name: "email-per-tenant", Match: &jqv1.JobMatcher{Type: "email", Labels: map[string]string{"tier": "free"}},
		Key: "{{.labels.tenant}}", Concurrency: 5, Rate: &jqv1.RateLimit{Limit: 100, Interval: durationpb.New(time.Minute)},
		CreatedAt: timestamppb.New(t0), UpdatedAt: timestamppb.New(t0),
	}
	u := &jqv1.ConstraintUsage{Running: 7, Keys: 2, Top: []*jqv1.ConstraintKeyUsage{
		{Key: "acme", Running: 5, Tokens: 0.25}, {Key: "initech", Running: 2, Tokens: 98},
	}}
	return c, u
}

func TestConstraintCommands(t *testing.T) {
	t.Parallel()
	con, use := sampleConstraint()

	f := &fakeConstraints{con: con}
	re, out := serveConstraints(t, f, "table")
	require.NoError(t, parseCreate(t, "email-per-tenant", "--match", "type=email", "--concurrency", "5", "--rate", "100/m").Run(re))
	require.Equal(t, "constraint email-per-tenant created: type=email label:tier=free key={{.labels.tenant}} concurrency=5 rate=100/m\n", out.String())

	f = &fakeConstraints{con: con, use: use}
	re, out = serveConstraints(t, f, "table")
	require.NoError(t, (&ConstraintShowCmd{Name: "email-per-tenant", Top: 3}).Run(re))
	require.EqualValues(t, 3, f.got.(*jqv1.GetConstraintRequest).GetTop())
	show := out.String()
	for _, want := range []string{"type=email label:tier=free", "{{.labels.tenant}}", "CONCURRENCY  5", "RATE         100/m", "RUNNING      7", "KEYS         2"} {
		require.Contains(t, show, want)
	}
	lines := out.lines()
	require.Equal(t, []string{"KEY", "RUNNING", "TOKENS"}, strings.Fields(lines[len(lines)-3]))
	require.Equal(t, []string{"acme", "5/5", "0.2"}, strings.Fields(lines[len(lines)-2]))
	require.Equal(t, []string{"initech", "2/5", "98.0"}, strings.Fields(lines[len(lines)-1]))

	f = &fakeConstraints{list: []*jqv1.ConstraintSummary{
		{Constraint: con, Usage: &jqv1.ConstraintUsage{Running: 7, Keys: 2}},
		{Constraint: &jqv1.Constraint{Name: "all", Match: &jqv1.JobMatcher{}, Concurrency: 1}, Usage: &jqv1.ConstraintUsage{}},
	}}
	re, out = serveConstraints(t, f, "table")
	require.NoError(t, (&ConstraintListCmd{}).Run(re))
	lines = out.lines()
	require.Len(t, lines, 3)
	require.Equal(t, []string{"NAME", "MATCH", "KEY", "CONCURRENCY", "RATE", "RUNNING", "KEYS"}, strings.Fields(lines[0]))
	require.Equal(t, []string{"email-per-tenant", "type=email", "label:tier=free", "{{.labels.tenant}}", "5", "100/m", "7", "2"}, strings.Fields(lines[1]))
	require.Equal(t, []string{"all", "*", "-", "1", "-", "0", "0"}, strings.Fields(lines[2]))

	f = &fakeConstraints{}
	re, out = serveConstraints(t, f, "table")
	require.NoError(t, (&ConstraintDeleteCmd{Name: "all"}).Run(re))
	require.Equal(t, "constraint all deleted\n", out.String())

	// -o json prints the server's answer.
	f = &fakeConstraints{con: con, use: use}
	re, out = serveConstraints(t, f, "json")
	require.NoError(t, (&ConstraintShowCmd{Name: "email-per-tenant", Top: 10}).Run(re))
	require.Equal(t, printed(t, "json", &jqv1.GetConstraintResponse{Constraint: con, Usage: use}), out.String())

	refuse := func(sentinel error, msg string) *fakeConstraints {
		return &fakeConstraints{err: apierr.New(sentinel, msg)}
	}
	for _, c := range []struct {
		api  *fakeConstraints
		cmd  interface{ Run(*runEnv) error }
		code int
		line string
	}{
		{refuse(queue.ErrConstraintExists, "constraint already exists"), parseCreate(t, "c", "--concurrency", "1"), exitError, `constraint "c" already exists (--replace replaces it)`},
		{refuse(queue.ErrInvalidArgument, "invalid argument: no limit set: give a concurrency, a rate or both"), parseCreate(t, "c"), exitUsage,
			`cannot create constraint "c": no limit set: give a concurrency, a rate or both`},
		{refuse(queue.ErrLimitReached, "100 constraints"), parseCreate(t, "c", "--concurrency", "1"), exitError, "refused by a server limit: 100 constraints"},
		{refuse(queue.ErrConstraintNotFound, "constraint not found"), &ConstraintShowCmd{Name: "c"}, exitNotFound, `constraint "c" not found (jq constraint list shows the constraints)`},
		{refuse(queue.ErrConstraintNotFound, "constraint not found"), &ConstraintDeleteCmd{Name: "c"}, exitNotFound, `constraint "c" not found (jq constraint list shows the constraints)`},
		{refuse(queue.ErrPermissionDenied, "viewer may not"), &ConstraintDeleteCmd{Name: "c"}, exitError, "permission denied: viewer may not"},
		{&fakeConstraints{}, &ConstraintShowCmd{Name: "c", Top: 101}, exitUsage, "--top 101: want 0 to 100"},
	} {
		re, _ := serveConstraints(t, c.api, "table")
		err := c.cmd.Run(re)
		require.Equal(t, c.code, exitCode(err), "%T: %v", c.cmd, err)
		require.Equal(t, c.line, errorLine(err, re.globals), "%T", c.cmd)
	}
}
