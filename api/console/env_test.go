package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/api/auth"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/internal/testenv/jqserver"
)

// env is a real jq server (Postgres, Redis, the API with authentication on) serving the console.
type env struct {
	ui      string // the console's base URL
	api     string // the API's address
	tokens  map[string]string
	jobs    jqv1connect.JobServiceClient // as admin
	queues  jqv1connect.QueueServiceClient
	workers jqv1connect.WorkerServiceClient
	// schedules as admin
	schedules jqv1connect.ScheduleServiceClient
	serverDB  string
}

// start runs a jq server with the console on and three tokens: admin, viewer and producer.
func start(t testing.TB, extraEnv ...string) *env {
	t.Helper()
	return startWith(t, nil, extraEnv...)
}

// startWith is start with the tokens of another env (nil: new ones), so that two servers accept
// the same credentials.
func startWith(t testing.TB, tokens map[string]string, extraEnv ...string) *env {
	t.Helper()
	e := &env{tokens: map[string]string{}}
	var entries []string
	for _, role := range []auth.Role{auth.RoleAdmin, auth.RoleViewer, auth.RoleProducer, auth.RoleWorker} {
		tok := tokens[string(role)]
		if tok == "" {
			var err error
			tok, err = auth.NewToken()
			require.NoError(t, err)
		}
		e.tokens[string(role)] = tok
		entries = append(entries, auth.TokenEntry{Name: string(role) + "-user", Roles: []auth.Role{role}, SHA256: auth.HashToken(tok)}.String())
	}
	uiPort := freePort(t)
	srv := jqserver.Start(t, append([]string{
		"JQ_AUTH_ENABLED=true", "JQ_AUTH_TOKENS=" + strings.Join(entries, ","),
		"JQ_UI_ENABLED=true", "JQ_UI_PORT=" + strconv.Itoa(uiPort),
		"JQ_SCHEDULER_INTERVAL_MS=50",
	}, extraEnv...)...)
	e.ui, e.api, e.serverDB = "http://127.0.0.1:"+strconv.Itoa(uiPort), srv.Addr, srv.DSN
	hc := &http.Client{Transport: bearer{tok: e.tokens["admin"]}}
	base := "http://" + srv.Addr
	e.jobs = jqv1connect.NewJobServiceClient(hc, base)
	e.queues = jqv1connect.NewQueueServiceClient(hc, base)
	e.workers = jqv1connect.NewWorkerServiceClient(hc, base)
	e.schedules = jqv1connect.NewScheduleServiceClient(hc, base)
	return e
}

type bearer struct{ tok string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}

func freePort(t testing.TB) int {
	t.Helper()
	port, err := testenv.PickPort() // below the ephemeral range: see there
	require.NoError(t, err)
	return port
}

// browser is an HTTP client with a cookie jar that does not follow redirects, so tests see them.
type browser struct {
	t    testing.TB
	base string
	hc   *http.Client
}

func (e *env) browser(t testing.TB) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &browser{t: t, base: e.ui, hc: &http.Client{
		Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// signedIn is a browser signed in with role's token.
func (e *env) signedIn(t testing.TB, role string) *browser {
	t.Helper()
	b := e.browser(t)
	resp, _ := b.post("/login", url.Values{"token": {e.tokens[role]}}, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/", resp.Header.Get("Location"))
	return b
}

func (b *browser) do(req *http.Request) (*http.Response, string) {
	b.t.Helper()
	resp, err := b.hc.Do(req)
	require.NoError(b.t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(b.t, err)
	return resp, string(body)
}

func (b *browser) get(path string, header http.Header) (*http.Response, string) {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.base+path, nil)
	require.NoError(b.t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	return b.do(req)
}

// post sends a form the way a browser on the console's page does (its Origin), plus header.
func (b *browser) post(path string, form url.Values, header http.Header) (*http.Response, string) {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	require.NoError(b.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.base)
	for k, v := range header {
		req.Header[k] = v
	}
	return b.do(req)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`)

// csrf reads the session's CSRF token from a page.
func (b *browser) csrf() string {
	b.t.Helper()
	_, body := b.get("/queues/default", nil)
	m := csrfRE.FindStringSubmatch(body)
	require.NotNil(b.t, m, "no CSRF token on the page:\n%s", body)
	return m[1]
}

// act posts an action with the CSRF token and the confirmation, and returns the flash it leaves.
func (b *browser) act(action string, form url.Values) (status int, flash string) {
	b.t.Helper()
	form.Set("csrf", b.csrf())
	form.Set("confirmed", "yes")
	resp, body := b.post("/actions/"+action, form, nil)
	if resp.StatusCode != http.StatusSeeOther {
		return resp.StatusCode, body
	}
	_, page := b.get(resp.Header.Get("Location"), nil)
	return resp.StatusCode, flashOf(page)
}

var flashRE = regexp.MustCompile(`<p class="flash (?:ok|err)" role="status">([^<]*)</p>`)

func flashOf(page string) string {
	if m := flashRE.FindStringSubmatch(page); m != nil {
		return m[1]
	}
	return ""
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func (e *env) submit(t testing.TB, spec *jqv1.JobSpec) string {
	t.Helper()
	resp, err := e.jobs.SubmitJob(ctx(t), connect.NewRequest(&jqv1.SubmitJobRequest{Job: spec}))
	require.NoError(t, err)
	return resp.Msg.GetJobId()
}

func (e *env) queue(t *testing.T, name string) *jqv1.Queue {
	t.Helper()
	resp, err := e.queues.GetQueue(ctx(t), connect.NewRequest(&jqv1.GetQueueRequest{Name: name}))
	require.NoError(t, err)
	return resp.Msg.GetQueue()
}

func (e *env) createQueue(t testing.TB, name string) {
	t.Helper()
	_, err := e.queues.CreateQueue(ctx(t), connect.NewRequest(&jqv1.CreateQueueRequest{Name: name}))
	require.NoError(t, err)
}

func (e *env) job(t *testing.T, id string) *jqv1.Job {
	t.Helper()
	resp, err := e.jobs.GetJob(ctx(t), connect.NewRequest(&jqv1.GetJobRequest{JobId: id}))
	require.NoError(t, err)
	return resp.Msg.GetJob()
}

func connectReq[T any](m *T) *connect.Request[T] { return connect.NewRequest(m) }

// cookies are the browser's cookies for the console.
func (b *browser) cookies() []*http.Cookie {
	u, err := url.Parse(b.base)
	require.NoError(b.t, err)
	return b.hc.Jar.Cookies(u)
}

func (e *env) schedule(t *testing.T, name string) *jqv1.Schedule {
	t.Helper()
	resp, err := e.schedules.GetSchedule(ctx(t), connect.NewRequest(&jqv1.GetScheduleRequest{Name: name}))
	require.NoError(t, err)
	return resp.Msg.GetSchedule()
}
