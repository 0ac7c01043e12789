package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
)

// TestConsole runs the handler tests against one real server (authentication on, the console on
// its own port): every page, every action's authorization and CSRF checks, and the escaping of
// hostile job data.
func TestConsole(t *testing.T) {
	e := start(t)

	t.Run("SignedOutSeesOnlyTheSignInPage", func(t *testing.T) {
		t.Parallel()
		b := e.browser(t)
		for _, p := range []string{"/", "/jobs", "/dead", "/workers", "/queues/default", "/jobs/00000000-0000-4000-8000-000000000000"} {
			resp, _ := b.get(p, nil)
			require.Equal(t, http.StatusSeeOther, resp.StatusCode, p)
			require.Equal(t, "/login", resp.Header.Get("Location"), p)
		}
		resp, _ := b.get("/", http.Header{"X-Jq-Live": {"1"}})
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a live refresh is told, not redirected")
		resp, body := b.get("/login", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, body, `type="password"`)
		require.Contains(t, resp.Header.Get("Content-Security-Policy"), "script-src 'self'")
		require.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"))
		// An action without a session changes nothing.
		resp, _ = b.post("/actions/queue-pause", url.Values{"name": {"default"}, "confirmed": {"yes"}}, nil)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		require.False(t, e.queue(t, "default").GetPaused())
	})

	t.Run("WrongTokenIsRefused", func(t *testing.T) {
		t.Parallel()
		b := e.browser(t)
		resp, body := b.post("/login", url.Values{"token": {"not-a-token"}}, nil)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		require.Contains(t, body, "unauthenticated: invalid token")
		require.Empty(t, resp.Cookies(), "no session for a wrong token")
		resp, _ = b.post("/login", url.Values{"token": {e.tokens["admin"]}}, http.Header{"Origin": {"http://evil.example"}})
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "a sign-in posted from another site is refused")
		require.Empty(t, resp.Cookies())
	})

	t.Run("SessionCookieIsHttpOnlyStrictAndTamperProof", func(t *testing.T) {
		t.Parallel()
		b := e.browser(t)
		resp, _ := b.post("/login", url.Values{"token": {e.tokens["viewer"]}}, nil)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		var ck *http.Cookie
		for _, c := range resp.Cookies() {
			if c.Name == "jq_console" {
				ck = c
			}
		}
		require.NotNil(t, ck)
		require.True(t, ck.HttpOnly)
		require.Equal(t, http.SameSiteStrictMode, ck.SameSite)
		require.NotContains(t, ck.Value, e.tokens["viewer"], "the token is sealed, not stored in the clear")
		// A cookie changed by one character no longer opens.
		forged := []byte(ck.Value)
		forged[len(forged)/2] ^= 1
		if forged[len(forged)/2] == '-' || forged[len(forged)/2] == '_' {
			forged[len(forged)/2] = 'A'
		}
		req, err := http.NewRequest(http.MethodGet, e.ui+"/", nil)
		require.NoError(t, err)
		req.AddCookie(&http.Cookie{Name: "jq_console", Value: string(forged)})
		resp2, _ := e.browser(t).do(req)
		require.Equal(t, http.StatusSeeOther, resp2.StatusCode)
		require.Equal(t, "/login", resp2.Header.Get("Location"))
	})

	t.Run("EveryPageRenders", func(t *testing.T) {
		t.Parallel()
		e.createQueue(t, "pages")
		id := e.submit(t, &jqv1.JobSpec{Queue: "pages", Type: "noop", Payload: []byte(`{"n":1}`), Labels: map[string]string{"team": "a"}})
		for _, role := range []string{"admin", "viewer"} {
			b := e.signedIn(t, role)
			for _, p := range []string{"/", "/queues/pages", "/jobs", "/jobs?queue=pages&state=PENDING&label=team%3Da", "/jobs/" + id, "/dead", "/dead?queue=pages", "/workers", "/constraints",
				"/scheduled", "/scheduled?queue=pages&type=noop", "/jobs?type=noop&created_from=2020-01-02T03:04&completed_to=2100-01-01T00:00:00"} {
				resp, body := b.get(p, nil)
				require.Equal(t, http.StatusOK, resp.StatusCode, "%s as %s:\n%s", p, role, body)
				require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
				live, lbody := b.get(p, http.Header{"X-Jq-Live": {"1"}})
				require.Equal(t, http.StatusOK, live.StatusCode, p)
				require.NotContains(t, lbody, "<html", "a live refresh gets the live part only")
			}
			_, body := b.get("/jobs?queue=pages", nil)
			require.Contains(t, body, id[:8])
			require.Contains(t, body, "team=a")
			_, body = b.get("/jobs/"+id, nil)
			require.Contains(t, body, "&#34;n&#34;: 1", "the JSON payload is pretty-printed")
			_, body = b.get("/queues/pages", nil)
			require.Contains(t, body, id[:8], "the next jobs in dispatch order")
		}
		b := e.signedIn(t, "viewer")
		resp, _ := b.get("/jobs?id="+id, nil)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "search by id")
		require.Equal(t, "/jobs/"+id, resp.Header.Get("Location"))
		// By the 8 characters the tables show: the job, when no other id starts with them.
		resp, body := b.get("/jobs?id="+id[:8], nil)
		if resp.StatusCode == http.StatusSeeOther {
			require.Equal(t, "/jobs/"+id, resp.Header.Get("Location"))
		} else {
			require.Contains(t, body, "have an id starting with", "an ambiguous prefix lists its jobs")
			require.Contains(t, body, "/jobs/"+id)
		}
	})

	t.Run("BadInputIsOneClearLine", func(t *testing.T) {
		t.Parallel()
		b := e.signedIn(t, "viewer")
		for p, want := range map[string]struct {
			status int
			text   string
		}{
			"/jobs?id=nope":                                       {http.StatusBadRequest, "job id prefix &#34;nope&#34;: want 4 to 32 hex digits"},
			"/jobs?id=0000000000":                                 {http.StatusNotFound, "not_found: no job id starts with &#34;0000000000&#34;"},
			"/jobs?state=SLEEPING":                                {http.StatusBadRequest, "invalid_argument: state &#34;SLEEPING&#34;"},
			"/jobs?label=nolabel":                                 {http.StatusBadRequest, "invalid_argument: label &#34;nolabel&#34;"},
			"/jobs?created_from=yesterday":                        {http.StatusBadRequest, "invalid_argument: created from &#34;yesterday&#34;: want a UTC time"},
			"/jobs?created_from=2026-01-02&created_to=2026-01-01": {http.StatusBadRequest, "created_before 2026-01-01T00:00:00Z is not after"},
			"/jobs?type=has%20space":                              {http.StatusBadRequest, "type &#34;has space&#34;: want"},
			"/jobs?page=garbage":                                  {http.StatusBadRequest, "invalid_argument:"},
			"/queues/no-such-queue":                               {http.StatusNotFound, "not_found:"},
			"/queues/BAD!":                                        {http.StatusBadRequest, "invalid_argument:"},
			"/jobs/00000000-0000-4000-8000-000000000000":          {http.StatusNotFound, "not_found:"},
			"/jobs?queue=no-such-queue":                           {http.StatusNotFound, "not_found: queue not found: &#34;no-such-queue&#34;"},
			"/dead?queue=no-such-queue&type=t":                    {http.StatusNotFound, "not_found: queue not found: &#34;no-such-queue&#34;"},
			"/scheduled?queue=no-such-queue":                      {http.StatusNotFound, "not_found: queue not found: &#34;no-such-queue&#34;"},
		} {
			resp, body := b.get(p, nil)
			require.Equal(t, want.status, resp.StatusCode, "%s:\n%s", p, body)
			require.Contains(t, body, want.text, p)
		}
	})

	t.Run("ViewerSeesNoButtonsAndIsRefusedByTheAPI", func(t *testing.T) {
		t.Parallel()
		e.createQueue(t, "viewer-q")
		id := e.submit(t, &jqv1.JobSpec{Queue: "viewer-q", Type: "noop"})
		_, err := e.jobs.CancelJob(ctx(t), connectReq(&jqv1.CancelJobRequest{JobId: id}))
		require.NoError(t, err)
		b := e.signedIn(t, "viewer")
		for _, p := range []string{"/", "/queues/viewer-q", "/jobs", "/jobs/" + id, "/dead", "/workers"} {
			_, body := b.get(p, nil)
			require.NotContains(t, body, `action="/actions/`, "%s shows a viewer an action", p)
		}
		// Forging the form anyway: the API refuses, nothing changes.
		status, flash := b.act("queue-pause", url.Values{"name": {"viewer-q"}})
		require.Equal(t, http.StatusSeeOther, status)
		require.Contains(t, flash, "permission_denied: token:viewer-user (roles viewer) may not call jq.v1.QueueService/PauseQueue")
		require.False(t, e.queue(t, "viewer-q").GetPaused())
		_, flash = b.act("job-retry", url.Values{"id": {id}})
		require.Contains(t, flash, "permission_denied")
		require.Equal(t, jqv1.JobState_JOB_STATE_DEAD_LETTERED, e.job(t, id).GetState())
		_, flash = b.act("dead-purge", url.Values{"queue": {"viewer-q"}})
		require.Contains(t, flash, "permission_denied")
		require.Equal(t, jqv1.JobState_JOB_STATE_DEAD_LETTERED, e.job(t, id).GetState())
		_, flash = b.act("job-delete", url.Values{"id": {id}})
		require.Contains(t, flash, "permission_denied: token:viewer-user (roles viewer) may not call jq.v1.JobService/DeleteJob")
		_, flash = b.act("jobs-bulk", url.Values{"op": {"delete"}, "queue": {"viewer-q"}})
		require.Contains(t, flash, "permission_denied")
		require.Contains(t, flash, "delete: 0 of 1 jobs done, 1 failed")
		require.Equal(t, jqv1.JobState_JOB_STATE_DEAD_LETTERED, e.job(t, id).GetState(), "nothing was deleted")
	})

	t.Run("AdminSeesButtons", func(t *testing.T) {
		t.Parallel()
		b := e.signedIn(t, "admin")
		_, body := b.get("/queues/default", nil)
		require.Contains(t, body, `action="/actions/queue-pause"`)
		require.Contains(t, body, `action="/actions/queue-delete"`)
		_, body = b.get("/dead", nil)
		require.Contains(t, body, `action="/actions/dead-purge"`)
		require.Contains(t, body, `action="/actions/jobs-bulk"`)
		require.NotContains(t, body, `name="op" value="delete"`, "unfiltered dead letters are purged")
		_, body = b.get("/dead?type=noop", nil)
		require.NotContains(t, body, `action="/actions/dead-purge"`, "purge cannot take a type filter")
		require.Contains(t, body, `name="op" value="delete"`, "the filtered dead letters are deleted in bulk instead")
		for p, want := range map[string]bool{"/jobs": true, "/jobs?state=DONE": true, "/jobs?state=DEAD_LETTERED": true,
			"/jobs?state=PENDING": false, "/jobs?state=RUNNING": false, "/jobs?state=FAILED": false} {
			_, body = b.get(p, nil)
			require.Equal(t, want, strings.Contains(body, `name="op" value="delete"`), "bulk delete on %s", p)
		}
	})

	t.Run("ActionsNeedCSRFSameOriginAndConfirmation", func(t *testing.T) {
		t.Parallel()
		e.createQueue(t, "csrf-q")
		b := e.signedIn(t, "admin")
		token := b.csrf()
		for name, c := range map[string]struct {
			form   url.Values
			header http.Header
			status int
		}{
			"no token":    {url.Values{"name": {"csrf-q"}, "confirmed": {"yes"}}, nil, http.StatusForbidden},
			"wrong token": {url.Values{"name": {"csrf-q"}, "confirmed": {"yes"}, "csrf": {strings.Repeat("0", 64)}}, nil, http.StatusForbidden},
			"other site":  {url.Values{"name": {"csrf-q"}, "confirmed": {"yes"}, "csrf": {token}}, http.Header{"Origin": {"http://evil.example"}}, http.StatusForbidden},
			"cross-site fetch": {url.Values{"name": {"csrf-q"}, "confirmed": {"yes"}, "csrf": {token}},
				http.Header{"Origin": {""}, "Sec-Fetch-Site": {"cross-site"}}, http.StatusForbidden},
		} {
			resp, body := b.post("/actions/queue-pause", c.form, c.header)
			require.Equal(t, c.status, resp.StatusCode, "%s: %s", name, body)
			require.Contains(t, body, "refused:", name)
			require.False(t, e.queue(t, "csrf-q").GetPaused(), name)
		}
		// Another session's token is not this session's.
		other := e.signedIn(t, "admin")
		resp, _ := b.post("/actions/queue-pause", url.Values{"name": {"csrf-q"}, "confirmed": {"yes"}, "csrf": {other.csrf()}}, nil)
		require.Equal(t, http.StatusForbidden, resp.StatusCode)
		// Unconfirmed: nothing changes.
		resp, _ = b.post("/actions/queue-pause", url.Values{"name": {"csrf-q"}, "csrf": {token}}, nil)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		_, page := b.get(resp.Header.Get("Location"), nil)
		require.Contains(t, flashOf(page), "failed_precondition: not confirmed: nothing was changed")
		require.False(t, e.queue(t, "csrf-q").GetPaused())
		// All of them: paused, then resumed.
		status, flash := b.act("queue-pause", url.Values{"name": {"csrf-q"}})
		require.Equal(t, http.StatusSeeOther, status)
		require.Equal(t, "queue csrf-q paused", flash)
		require.True(t, e.queue(t, "csrf-q").GetPaused())
		_, flash = b.act("queue-resume", url.Values{"name": {"csrf-q"}})
		require.Equal(t, "queue csrf-q resumed", flash)
		require.False(t, e.queue(t, "csrf-q").GetPaused())
		// A back link to another site is not followed.
		form := url.Values{"name": {"csrf-q"}, "csrf": {token}, "confirmed": {"yes"}, "back": {"//evil.example/x"}}
		resp, _ = b.post("/actions/queue-resume", form, nil)
		require.Equal(t, "/queues/csrf-q", resp.Header.Get("Location"))
	})

	t.Run("HostileJobDataRendersAsText", func(t *testing.T) {
		t.Parallel()
		e.createQueue(t, "hostile")
		const typ = `<script>alert("type")</script>`
		id := e.submit(t, &jqv1.JobSpec{
			Queue: "hostile", Type: typ,
			Payload: []byte(`{"html":"</pre><script>alert('payload')</script>"}`),
			Labels:  map[string]string{"x\"><script>alert(1)</script>": `<img src=x onerror=alert("label")>`},
		})
		b := e.signedIn(t, "admin")
		for _, p := range []string{"/jobs?queue=hostile", "/jobs/" + id, "/queues/hostile", "/jobs?queue=hostile&label=" + url.QueryEscape(`a=<script>`)} {
			_, body := b.get(p, nil)
			require.NotContains(t, body, "<script>alert", p)
			require.NotContains(t, body, "<img src=x", p)
			require.NotContains(t, body, `"><script>`, p)
		}
		_, body := b.get("/jobs/"+id, nil)
		require.Contains(t, body, "&lt;script&gt;alert(&#34;type&#34;)&lt;/script&gt;")
		require.Contains(t, body, "&lt;img src=x onerror=alert(&#34;label&#34;)&gt;")
		require.Contains(t, body, "&lt;/pre&gt;&lt;script&gt;alert(&#39;payload&#39;)&lt;/script&gt;")
		_, body = b.get("/jobs?queue=hostile&label="+url.QueryEscape(`a=<script>`), nil)
		require.Contains(t, body, `value="a=&lt;script&gt;"`, "the filter echoes as an escaped value")
		require.NotContains(t, body, e.tokens["admin"], "the token never goes into a page")
	})

	t.Run("RetryAndPurgeDeadLettersInBulk", func(t *testing.T) {
		t.Parallel()
		e.createQueue(t, "bulk-q")
		e.createQueue(t, "bulk-other")
		var ids []string
		for range 3 {
			ids = append(ids, e.submit(t, &jqv1.JobSpec{Queue: "bulk-q", Type: "noop", Labels: map[string]string{"batch": "b1"}}))
		}
		other := e.submit(t, &jqv1.JobSpec{Queue: "bulk-other", Type: "noop"})
		b := e.signedIn(t, "admin")
		// Pause so nothing runs the jobs under the test; then cancel them all from the console.
		b.act("queue-pause", url.Values{"name": {"bulk-q"}})
		b.act("queue-pause", url.Values{"name": {"bulk-other"}})
		_, flash := b.act("jobs-bulk", url.Values{"op": {"cancel"}, "queue": {"bulk-q"}, "label": {"batch=b1"}})
		require.Equal(t, "cancel: 3 jobs", flash)
		_, err := e.jobs.CancelJob(ctx(t), connectReq(&jqv1.CancelJobRequest{JobId: other}))
		require.NoError(t, err)
		_, body := b.get("/dead?queue=bulk-q", nil)
		for _, id := range ids {
			require.Contains(t, body, id[:8])
		}
		require.NotContains(t, body, other[:8])
		_, flash = b.act("jobs-bulk", url.Values{"op": {"retry"}, "queue": {"bulk-q"}, "state": {"DEAD_LETTERED"}})
		require.Equal(t, "retry: 3 jobs", flash)
		for _, id := range ids {
			require.Equal(t, jqv1.JobState_JOB_STATE_PENDING, e.job(t, id).GetState())
		}
		require.Equal(t, jqv1.JobState_JOB_STATE_DEAD_LETTERED, e.job(t, other).GetState(), "the filter's queue only")
		_, flash = b.act("jobs-bulk", url.Values{"op": {"retry"}, "queue": {"bulk-q"}})
		require.Equal(t, "invalid_argument: bulk retry needs a state filter of FAILED or DEAD_LETTERED", flash)
		_, flash = b.act("dead-purge", url.Values{"queue": {"bulk-other"}})
		require.Equal(t, "1 dead letters purged", flash)
		_, err = e.jobs.GetJob(ctx(t), connectReq(&jqv1.GetJobRequest{JobId: other}))
		require.Error(t, err)
	})

	t.Run("DeleteInBulkSkipsLiveJobs", func(t *testing.T) {
		t.Parallel()
		e.createQueue(t, "del-q")
		b := e.signedIn(t, "admin")
		b.act("queue-pause", url.Values{"name": {"del-q"}}) // nothing runs the jobs under the test
		var dead []string
		for range 2 {
			id := e.submit(t, &jqv1.JobSpec{Queue: "del-q", Type: "noop", Labels: map[string]string{"batch": "d1"}})
			_, err := e.jobs.CancelJob(ctx(t), connectReq(&jqv1.CancelJobRequest{JobId: id}))
			require.NoError(t, err)
			dead = append(dead, id)
		}
		live := e.submit(t, &jqv1.JobSpec{Queue: "del-q", Type: "noop", Labels: map[string]string{"batch": "d1"}})
		otherBatch := e.submit(t, &jqv1.JobSpec{Queue: "del-q", Type: "noop", Labels: map[string]string{"batch": "d2"}})
		_, err := e.jobs.CancelJob(ctx(t), connectReq(&jqv1.CancelJobRequest{JobId: otherBatch}))
		require.NoError(t, err)

		_, flash := b.act("jobs-bulk", url.Values{"op": {"delete"}, "queue": {"del-q"}, "label": {"batch=d1"}})
		require.Equal(t, "delete: 2 jobs; 1 skipped: not DONE or DEAD_LETTERED (cancel them first)", flash)
		for _, id := range dead {
			_, err := e.jobs.GetJob(ctx(t), connectReq(&jqv1.GetJobRequest{JobId: id}))
			require.Error(t, err, "deleted")
		}
		require.Equal(t, jqv1.JobState_JOB_STATE_PENDING, e.job(t, live).GetState(), "a live job is skipped")
		require.Equal(t, jqv1.JobState_JOB_STATE_DEAD_LETTERED, e.job(t, otherBatch).GetState(), "outside the filter")
		_, flash = b.act("jobs-bulk", url.Values{"op": {"explode"}, "queue": {"del-q"}})
		require.Equal(t, `invalid_argument: bulk action &#34;explode&#34;: want retry, cancel or delete`, flash)

		// One job from its page: a live job has no button, and a forged form is refused by the API.
		_, body := b.get("/jobs/"+live, nil)
		require.NotContains(t, body, `action="/actions/job-delete"`)
		_, flash = b.act("job-delete", url.Values{"id": {live}})
		require.Contains(t, flash, "failed_precondition: job "+live+": illegal state transition: only a DONE or DEAD_LETTERED job can be deleted, this one is PENDING: cancel it first")
		require.Equal(t, jqv1.JobState_JOB_STATE_PENDING, e.job(t, live).GetState())
		_, body = b.get("/jobs/"+otherBatch, nil)
		require.Contains(t, body, `action="/actions/job-delete"`)
		form := url.Values{"id": {otherBatch}, "csrf": {b.csrf()}, "confirmed": {"yes"}}
		resp, _ := b.post("/actions/job-delete", form, nil)
		require.Equal(t, "/jobs", resp.Header.Get("Location"), "back to the list: the job's page is gone")
		_, page := b.get("/jobs", nil)
		require.Equal(t, "job "+otherBatch+" deleted", flashOf(page))
		_, err = e.jobs.GetJob(ctx(t), connectReq(&jqv1.GetJobRequest{JobId: otherBatch}))
		require.Error(t, err)
	})

	t.Run("QueueSettingsForm", func(t *testing.T) {
		t.Parallel()
		e.createQueue(t, "form-q")
		b := e.signedIn(t, "admin")
		_, body := b.get("/queues/form-q", nil)
		require.Contains(t, body, `action="/actions/queue-update"`)
		require.Contains(t, body, `name="backoff_base" value="5s"`, "the current values, in the form")
		form := url.Values{"name": {"form-q"}, "max_retries": {"7"}, "ttl": {"90s"}, "weights": {"9=3,0=1"},
			"max_wait": {""}, "backoff_base": {"5s"}, "backoff_max": {"5m0s"}, "result_retention": {"24h0m0s"}}
		_, flash := b.act("queue-update", form)
		require.Equal(t, "queue form-q updated", flash)
		q := e.queue(t, "form-q")
		require.EqualValues(t, 7, q.GetMaxRetries())
		require.Equal(t, 90*time.Second, q.GetTtl().AsDuration())
		require.Equal(t, map[int32]int32{9: 3, 0: 1}, q.GetPriorityWeights())

		form.Set("weights", "9=3,9=1")
		_, flash = b.act("queue-update", form)
		require.Contains(t, flash, "priority 9 is listed twice")
		form.Set("weights", "")
		form.Set("backoff_base", "1h")
		_, flash = b.act("queue-update", form)
		require.Contains(t, flash, "backoff_max 5m0s is below backoff_base 1h0m0s")
		require.Equal(t, map[int32]int32{9: 3, 0: 1}, e.queue(t, "form-q").GetPriorityWeights(), "refused: nothing changed")
	})

	t.Run("EveryActionIsRefusedToAViewer", func(t *testing.T) {
		t.Parallel()
		e.createQueue(t, "refused-q")
		id := e.submit(t, &jqv1.JobSpec{Queue: "refused-q", Type: "noop"})
		b := e.signedIn(t, "viewer")
		for action, form := range map[string]url.Values{
			"queue-pause":     {"name": {"refused-q"}},
			"queue-resume":    {"name": {"refused-q"}},
			"queue-delete":    {"name": {"refused-q"}, "force": {"yes"}},
			"queue-update":    {"name": {"refused-q"}, "max_retries": {"9"}},
			"job-retry":       {"id": {id}},
			"job-cancel":      {"id": {id}},
			"job-delete":      {"id": {id}},
			"jobs-bulk":       {"op": {"cancel"}, "queue": {"refused-q"}},
			"dead-purge":      {"queue": {"refused-q"}},
			"worker-drain":    {"id": {"w-any"}},
			"worker-shutdown": {"id": {"w-any"}},
			// Matching the test's own queue only: constraints apply to the whole database.
			"constraint-create": {"name": {"refused-c"}, "queue": {"refused-q"}, "concurrency": {"1"}},
			"constraint-delete": {"name": {"refused-c"}},
		} {
			status, flash := b.act(action, form)
			require.Equal(t, http.StatusSeeOther, status, action)
			require.Contains(t, flash, "permission_denied: token:viewer-user (roles viewer) may not call", action)
		}
		require.Equal(t, jqv1.JobState_JOB_STATE_PENDING, e.job(t, id).GetState(), "nothing changed")
		require.False(t, e.queue(t, "refused-q").GetPaused())
	})

	t.Run("WorkersPageEscapesAndActs", func(t *testing.T) {
		t.Parallel()
		const host = `<script>alert("host")</script>`
		reg, err := e.workers.RegisterWorker(ctx(t), connectReq(&jqv1.RegisterWorkerRequest{
			WorkerId: "w-console-hostile", Hostname: host, Concurrency: 2, Queues: []string{"default"}, Version: `<b>1</b>`,
		}))
		require.NoError(t, err)
		wid := reg.Msg.GetWorker().GetId()
		_, body := e.signedIn(t, "viewer").get("/workers", nil)
		require.Contains(t, body, "&lt;script&gt;alert(&#34;host&#34;)&lt;/script&gt;")
		require.NotContains(t, body, "<script>alert", "the hostname renders as text")
		require.NotContains(t, body, "<b>1</b>")
		require.NotContains(t, body, `action="/actions/worker-`, "a viewer sees no worker action")
		b := e.signedIn(t, "admin")
		_, body = b.get("/workers", nil)
		require.Contains(t, body, `action="/actions/worker-drain"`)
		_, flash := b.act("worker-drain", url.Values{"id": {wid}})
		require.Equal(t, "worker "+wid+": drain requested", flash)
		_, flash = b.act("worker-shutdown", url.Values{"id": {wid}})
		require.Equal(t, "worker "+wid+": shutdown requested", flash)
		ws, err := e.workers.ListWorkers(ctx(t), connectReq(&jqv1.ListWorkersRequest{}))
		require.NoError(t, err)
		for _, w := range ws.Msg.GetWorkers() {
			if w.GetId() == wid {
				require.Equal(t, jqv1.WorkerStatus_WORKER_STATUS_DRAINING, w.GetStatus())
			}
		}
	})

	t.Run("TypeTimeAndScheduledViews", func(t *testing.T) {
		t.Parallel()
		e.createQueue(t, "views")
		b := e.signedIn(t, "admin")
		b.act("queue-pause", url.Values{"name": {"views"}}) // nothing runs the jobs under the test
		now := e.submit(t, &jqv1.JobSpec{Queue: "views", Type: "email.send"})
		report := e.submit(t, &jqv1.JobSpec{Queue: "views", Type: "report.build"})
		later := e.submit(t, &jqv1.JobSpec{Queue: "views", Type: "email.send", RunAt: timestamppb.New(time.Now().Add(time.Hour))})

		_, body := b.get("/jobs?queue=views&type=email.send", nil)
		require.Contains(t, body, now[:8])
		require.Contains(t, body, later[:8])
		require.NotContains(t, body, report[:8], "another type")
		future := time.Now().UTC().Add(time.Hour).Format("2006-01-02T15:04")
		_, body = b.get("/jobs?queue=views&created_from="+future, nil)
		require.Contains(t, body, "No jobs match.")
		_, body = b.get("/jobs?queue=views&completed_from=2020-01-01T00:00", nil)
		require.Contains(t, body, "No jobs match.", "nothing completed")

		_, body = b.get("/scheduled?queue=views", nil)
		require.Contains(t, body, later[:8], "the scheduled view lists the delayed job")
		require.NotContains(t, body, now[:8], "and not the due ones")
		require.Contains(t, body, `aria-current="page">Scheduled`)
		// The bulk form carries the whole filter: cancelling from the scheduled view takes only the
		// delayed job, not the due one of the same queue and type.
		require.Contains(t, body, `name="scheduled" value="1"`)
		_, flash := b.act("jobs-bulk", url.Values{"op": {"cancel"}, "queue": {"views"}, "type": {"email.send"}, "scheduled": {"1"}})
		require.Equal(t, "cancel: 1 jobs", flash)
		require.Equal(t, jqv1.JobState_JOB_STATE_DEAD_LETTERED, e.job(t, later).GetState())
		require.Equal(t, jqv1.JobState_JOB_STATE_PENDING, e.job(t, now).GetState())
		_, body = b.get("/jobs?queue=views&type=email.send&state=PENDING", nil)
		require.Contains(t, body, `name="type" value="email.send"`, "the job list's bulk forms carry the type too")

		// The counts say what they are.
		_, body = b.get("/queues/views", nil)
		for _, w := range []string{"Throughput", "attempts finished, last minute", "of the attempts finished in the last", "stored"} {
			require.Contains(t, body, w)
		}
		_, body = b.get("/", nil)
		require.Contains(t, body, `data-rate="0"`)
		require.Contains(t, body, "beyond that an estimate (≈)")
	})

	t.Run("Constraints", func(t *testing.T) {
		t.Parallel()
		testConstraints(t, e)
	})

	t.Run("JobActionsAndWorkers", func(t *testing.T) {
		t.Parallel()
		e.createQueue(t, "job-q")
		b := e.signedIn(t, "admin")
		b.act("queue-pause", url.Values{"name": {"job-q"}})
		id := e.submit(t, &jqv1.JobSpec{Queue: "job-q", Type: "noop"})
		_, body := b.get("/jobs/"+id, nil)
		require.Contains(t, body, `action="/actions/job-cancel"`)
		require.NotContains(t, body, `action="/actions/job-retry"`, "a PENDING job cannot be retried")
		_, flash := b.act("job-cancel", url.Values{"id": {id}})
		require.Equal(t, "job "+id+" cancelled", flash)
		_, body = b.get("/jobs/"+id, nil)
		require.Contains(t, body, "cancelled", "the failure is shown with its reason")
		require.Contains(t, body, `action="/actions/job-retry"`)
		_, flash = b.act("job-retry", url.Values{"id": {id}})
		require.Equal(t, "job "+id+" retried: PENDING again", flash)
		_, flash = b.act("job-retry", url.Values{"id": {id}})
		require.Contains(t, flash, "failed_precondition:")
		_, flash = b.act("worker-drain", url.Values{"id": {"no-such-worker"}})
		require.Contains(t, flash, "not_found:")
		_, flash = b.act("queue-delete", url.Values{"name": {"job-q"}})
		require.Contains(t, flash, "failed_precondition:", "a queue with jobs is deleted only with its jobs")
		_, flash = b.act("queue-delete", url.Values{"name": {"job-q"}, "force": {"yes"}})
		require.Equal(t, "queue job-q deleted with 1 jobs", flash)
	})
}
