package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
	"github.com/jq-dev/jq/internal/testenv"
)

// testConstraints is TestConsole's Constraints part: the pages as admin and viewer, create (good
// and bad) and delete, usage after a job of a limited key is claimed, hostile keys, templates and
// label values escaped. Every constraint it makes matches its own queue only: constraints apply
// to the whole database, and the other subtests run beside it.
func testConstraints(t *testing.T, e *env) {
	const q = "cons-q"
	e.createQueue(t, q)
	admin, viewer := e.signedIn(t, "admin"), e.signedIn(t, "viewer")

	// Bad input: one line from the form's own parsing or from the API, and nothing created.
	for want, form := range map[string]url.Values{
		"invalid_argument: concurrency &#34;two&#34;: want a whole number": {"name": {"bad"}, "queue": {q}, "concurrency": {"two"}},
		"invalid_argument: rate":                                 {"name": {"bad"}, "queue": {q}, "rate": {"fast"}},
		"invalid_argument: burst applies to a rate only":         {"name": {"bad"}, "queue": {q}, "concurrency": {"1"}, "burst": {"5"}},
		"invalid_argument: label &#34;tier&#34;: want key=value": {"name": {"bad"}, "queue": {q}, "concurrency": {"1"}, "labels": {"tier"}},
		"invalid_argument:":                                      {"name": {"Bad Name!"}, "queue": {q}, "concurrency": {"1"}},
		"no limit set":                                           {"name": {"bad"}, "queue": {q}},
		"key template":                                           {"name": {"bad"}, "queue": {q}, "concurrency": {"1"}, "key": {"{{.tenant}}"}},
	} {
		status, flash := admin.act("constraint-create", form)
		require.Equal(t, http.StatusSeeOther, status, want)
		require.Contains(t, flash, want)
		require.Contains(t, flash, "invalid_argument: ", "one line with the API's code")
	}
	_, body := admin.get("/constraints/bad", nil)
	require.Contains(t, body, "not_found:", "no bad constraint was created")

	// A good one: per tenant, one running at a time; a hostile template literal and label value.
	const hostileLabel = `<img src=x onerror=alert("match")>`
	status, flash := admin.act("constraint-create", url.Values{
		"name": {"cons-tenant"}, "queue": {q}, "type": {"cons.*"}, "labels": {"tier=free\nzone=" + hostileLabel},
		"key": {"<b>{{.labels.tenant}}"}, "concurrency": {"1"}, "rate": {"100/m"}, "burst": {"20"},
	})
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, "constraint cons-tenant created: queue=cons-q type=cons.* label:tier=free label:zone=&lt;img src=x onerror=alert(&#34;match&#34;)&gt; key=&lt;b&gt;{{.labels.tenant}} concurrency=1 rate=100/m,burst=20", flash)
	status, flash = admin.act("constraint-create", url.Values{"name": {"cons-tenant"}, "queue": {q}, "concurrency": {"1"}})
	require.Equal(t, http.StatusSeeOther, status)
	require.Contains(t, flash, "already_exists:", "without replace an existing name is refused")
	// Replaced (comma-separated labels this time), as the detail page's form sends it.
	_, flash = admin.act("constraint-create", url.Values{
		"name": {"cons-tenant"}, "queue": {q}, "type": {"cons.*"}, "labels": {"tier=free, zone=" + hostileLabel},
		"key": {"<b>{{.labels.tenant}}"}, "concurrency": {"1"}, "rate": {"100/m"}, "replace": {"yes"},
	})
	require.Contains(t, flash, "constraint cons-tenant created or replaced:")
	require.NotContains(t, flash, "burst", "replaced as the form says: no burst now")

	for _, b := range []*browser{admin, viewer} {
		for _, p := range []string{"/constraints", "/constraints/cons-tenant"} {
			resp, body := b.get(p, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s:\n%s", p, body)
			require.Contains(t, body, `aria-current="page">Constraints`)
			require.Contains(t, body, "cons-tenant")
			require.Contains(t, body, "&lt;b&gt;{{.labels.tenant}}", "the key template renders as text")
			require.Contains(t, body, "zone=&lt;img src=x onerror=alert(&#34;match&#34;)&gt;")
			require.NotContains(t, body, "<img src=x")
			require.NotContains(t, body, "<b>{{")
			live, lbody := b.get(p, http.Header{"X-Jq-Live": {"1"}})
			require.Equal(t, http.StatusOK, live.StatusCode, p)
			require.NotContains(t, lbody, "<html", "a live refresh gets the live part only")
		}
	}
	_, body = viewer.get("/constraints/cons-tenant", nil)
	require.NotContains(t, body, `action="/actions/`, "a viewer sees no button")
	_, body = viewer.get("/constraints", nil)
	require.NotContains(t, body, `action="/actions/`, "a viewer sees no form")
	_, body = admin.get("/constraints", nil)
	require.Contains(t, body, `action="/actions/constraint-create"`)
	require.Contains(t, body, `<a href="/constraints/cons-tenant">cons-tenant</a>`)
	_, body = admin.get("/constraints/cons-tenant", nil)
	require.Contains(t, body, `action="/actions/constraint-delete"`)
	require.Contains(t, body, `name="concurrency" value="1"`, "the replace form holds the constraint's own fields")
	require.Contains(t, body, `name="replace" value="yes" checked`)
	require.Contains(t, body, "No key is busy.")

	// Forged forms from a viewer: the API refuses, nothing changes.
	_, flash = viewer.act("constraint-delete", url.Values{"name": {"cons-tenant"}})
	require.Contains(t, flash, "permission_denied: token:viewer-user (roles viewer) may not call jq.v1.ConstraintService/DeleteConstraint")
	_, flash = viewer.act("constraint-create", url.Values{"name": {"cons-viewer"}, "queue": {q}, "concurrency": {"1"}})
	require.Contains(t, flash, "permission_denied: token:viewer-user (roles viewer) may not call jq.v1.ConstraintService/CreateConstraint")
	_, body = admin.get("/constraints", nil)
	require.Contains(t, body, "cons-tenant")
	require.NotContains(t, body, "cons-viewer")

	// Usage: three jobs, two of tenant acme and one of a hostile tenant. A worker with room for
	// three gets the hostile one and one of acme's; acme's other waits for its key's slot.
	const hostileKey = `<script>alert("key")</script>`
	spec := func(tenant string) *jqv1.JobSpec {
		return &jqv1.JobSpec{Queue: q, Type: "cons.run", Labels: map[string]string{"tier": "free", "zone": hostileLabel, "tenant": tenant}}
	}
	jobs := []string{e.submit(t, spec("acme")), e.submit(t, spec("acme")), e.submit(t, spec(hostileKey))}
	got := claim(t, e, "w-cons", q, 3, 2)
	held := ""
	for _, id := range jobs[:2] {
		if !got[id] {
			held = id
		}
	}
	require.True(t, got[jobs[2]], "the hostile tenant's job is not held by acme's limit")
	require.NotEmpty(t, held, "one of acme's jobs is held")
	testenv.Eventually(t, 10*time.Second, func() error {
		_, body := viewer.get("/jobs/"+held, nil)
		if !strings.Contains(body, "limited by constraint cons-tenant, key &lt;b&gt;acme: 1/1 running") {
			return fmt.Errorf("the job page does not say why the job waits:\n%s", body)
		}
		return nil
	})
	_, body = viewer.get("/constraints", nil)
	require.Regexp(t, `cons-tenant</a></td>(?s:.*?)<td class="num">2</td>\s*<td class="num">2</td>`, body, "2 running, 2 active keys")
	_, body = viewer.get("/constraints/cons-tenant", http.Header{"X-Jq-Live": {"1"}})
	require.Contains(t, body, `<td class="id">&lt;b&gt;acme</td>`)
	require.Contains(t, body, `<td class="id">&lt;b&gt;&lt;script&gt;alert(&#34;key&#34;)&lt;/script&gt;</td>`, "a hostile key renders as text")
	require.NotContains(t, body, "<script>")
	require.Contains(t, body, `<td class="num">1 / 1</td>`)
	require.Contains(t, body, "Rate tokens")

	// Delete: unconfirmed changes nothing; confirmed, back to the list, and the held job is free.
	resp, _ := admin.post("/actions/constraint-delete", url.Values{"name": {"cons-tenant"}, "csrf": {admin.csrf()}}, nil)
	require.Equal(t, "/constraints/cons-tenant", resp.Header.Get("Location"))
	_, body = admin.get("/constraints/cons-tenant", nil)
	require.Contains(t, flashOf(body), "failed_precondition: not confirmed: nothing was changed")
	form := url.Values{"name": {"cons-tenant"}, "csrf": {admin.csrf()}, "confirmed": {"yes"}}
	resp, _ = admin.post("/actions/constraint-delete", form, nil)
	require.Equal(t, "/constraints", resp.Header.Get("Location"), "back to the list: the constraint's page is gone")
	_, body = admin.get("/constraints", nil)
	require.Equal(t, "constraint cons-tenant deleted", flashOf(body))
	require.NotContains(t, body, "cons-tenant</a>")
	_, flash = admin.act("constraint-delete", url.Values{"name": {"cons-tenant"}})
	require.Contains(t, flash, "not_found:")
}

// claim registers a worker on queue and opens its stream with capacity, acknowledging the first
// n assignments (their jobs RUNNING); it returns their job ids. The stream stays open until the
// test ends, so the jobs keep running under their keys.
func claim(t *testing.T, e *env, id, queue string, capacity, n int) map[string]bool {
	t.Helper()
	hc := &http.Client{Transport: bearer{tok: e.tokens["worker"]}}
	wc := jqv1connect.NewWorkerServiceClient(hc, "http://"+e.api)
	_, err := wc.RegisterWorker(ctx(t), connectReq(&jqv1.RegisterWorkerRequest{WorkerId: id, Hostname: "console-test", Concurrency: int32(capacity), Queues: []string{queue}}))
	require.NoError(t, err)
	sctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := wc.StreamJobs(sctx, connectReq(&jqv1.StreamJobsRequest{WorkerId: id, Capacity: int32(capacity)}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = stream.Close() })
	assigned := make(chan *jqv1.Assignment)
	go func() {
		for stream.Receive() {
			if a := stream.Msg().GetAssignment(); a != nil {
				select {
				case assigned <- a:
				case <-sctx.Done():
					return
				}
			}
		}
	}()
	got := map[string]bool{}
	var leases []*jqv1.JobLease
	timeout := time.After(15 * time.Second)
	for len(got) < n {
		select {
		case a := <-assigned:
			got[a.GetJob().GetId()] = true
			leases = append(leases, &jqv1.JobLease{JobId: a.GetJob().GetId(), Attempt: a.GetAttempt()})
		case <-timeout:
			t.Fatalf("worker %s got %d assignments, want %d", id, len(got), n)
		}
	}
	ack, err := wc.AckJobs(ctx(t), connectReq(&jqv1.AckJobsRequest{WorkerId: id, Leases: leases}))
	require.NoError(t, err)
	for _, r := range ack.Msg.GetResults() {
		require.True(t, r.GetOk(), "lease of %s", r.GetJobId())
	}
	return got
}
