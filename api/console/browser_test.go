package console_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/roles"
)

// chromium finds Debian's chromium, installing the package when it is missing (as
// scripts/services.sh installs the other services). It skips the test only when it cannot.
func chromium(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	var out bytes.Buffer
	for _, args := range [][]string{{"apt-get", "update", "-qq"}, {"apt-get", "install", "-y", "-qq", "chromium"}} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Skipf("browser tests need Debian's chromium, which is missing and could not be installed (%s: %v):\n%s", args[1], err, out.String())
		}
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		t.Skipf("browser tests need chromium: installed, but not on PATH: %v", err)
	}
	return p
}

// artifacts is where screenshots go: $JQ_TEST_ARTIFACTS, else testdata/artifacts (ignored by git).
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("JQ_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("testdata", "artifacts")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// startWorker runs `jq --role=worker` in this process, on the default queue, until the test ends.
func startWorker(t *testing.T, e *env, id string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out logBuf
	done := make(chan int, 1)
	environ := []string{
		"JQ_WORKER_SERVER_ADDR=" + e.api, "JQ_TOKEN=" + e.tokens["worker"], "JQ_WORKER_ID=" + id,
		"JQ_WORKER_METRICS_PORT=" + strconv.Itoa(freePort(t)), "JQ_WORKER_HEALTH_PORT=" + strconv.Itoa(freePort(t)),
		"JQ_WORKER_BIND_HOST=127.0.0.1", "JQ_LOGGING_LEVEL=warn", "JQ_WORKER_ACK_DELAY_MS=10",
	}
	go func() {
		done <- roles.Main(ctx, []string{"--role=worker"}, environ, roles.IO{Stdin: bytes.NewReader(nil), Stdout: &out, Stderr: &out})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Errorf("worker did not stop:\n%s", out.String())
		}
	})
	eventually(t, 30*time.Second, func() error {
		resp, err := e.workers.ListWorkers(ctx, connectReq(&jqv1.ListWorkersRequest{}))
		if err != nil {
			return err
		}
		for _, w := range resp.Msg.GetWorkers() {
			if w.GetId() == id && w.GetStatus() == jqv1.WorkerStatus_WORKER_STATUS_ONLINE {
				return nil
			}
		}
		return fmt.Errorf("worker %s not online yet:\n%s", id, out.String())
	})
}

type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *logBuf) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

func eventually(t *testing.T, within time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %v", within, err)
		}
		time.Sleep(50 * time.Millisecond) // polling the API: there is no event to wait on from here
	}
}

// TestBrowser drives the console in headless Chromium: sign in, watch a job go PENDING → DONE
// without a reload, pause a queue, retry a dead letter, and as a viewer see no buttons.
// Screenshots go to testdata/artifacts.
func TestBrowser(t *testing.T) {
	exe := chromium(t)
	e := start(t)
	startWorker(t, e, "browser-w1")
	e.createQueue(t, "parked") // no worker serves it: its jobs wait

	dir := artifacts(t)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900))
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)
	// The first run starts the browser and must not carry a timeout (it would end the browser).
	require.NoError(t, chromedp.Do(bctx, chromedp.Navigate("about:blank")))

	// A step's deadline catches a page that never shows what it waits for, not a slow machine: a
	// 30 s deadline ran out for the queue-settings step with the whole suite at load 27.
	step := func(name string) (context.Context, context.CancelFunc) {
		return context.WithTimeout(bctx, 2*time.Minute)
	}
	do := func(name string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := step(name)
		defer cancel()
		require.NoError(t, chromedp.Do(ctx, actions...), name)
	}
	text := func(sel string) string {
		t.Helper()
		ctx, cancel := step(sel)
		defer cancel()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err, sel)
		return s
	}
	eval := func(expr string) any {
		t.Helper()
		ctx, cancel := step(expr)
		defer cancel()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[any](expr))
		require.NoError(t, err, expr)
		return v
	}
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			png, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
		})
	}
	scheme := func(s string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: s}},
			})
			return err
		})
	}
	visible := func(sel string) chromedp.Action[chromedp.Void] { return chromedp.WaitVisible(chromedp.CSS(sel)) }
	click := func(sel string) chromedp.Action[chromedp.Void] { return chromedp.Click(chromedp.CSS(sel)) }
	signIn := func(role string) {
		t.Helper()
		do("sign in as "+role,
			visible(`#token`),
			chromedp.SendKeys(chromedp.CSS(`#token`), e.tokens[role]),
			chromedp.Submit(chromedp.CSS(`#token`)),
			visible(`table.queues`),
		)
	}

	do("login page", chromedp.Navigate(e.ui+"/"), visible(`#token`), shot("login"))
	signIn("admin")
	require.Equal(t, "Overview", text(`h1`))

	// A job goes PENDING → DONE on its page while it is open, without a reload: held in a paused
	// queue first, so the page surely shows it PENDING, then the queue is resumed.
	_, err := e.queues.PauseQueue(ctx(t), connectReq(&jqv1.PauseQueueRequest{Name: "default"}))
	require.NoError(t, err)
	id := e.submit(t, &jqv1.JobSpec{Queue: "default", Type: "noop", Payload: []byte(`{"hello":"console"}`), Labels: map[string]string{"from": "browser-test"}})
	do("job page", chromedp.Navigate(e.ui+"/jobs/"+id), visible(`#live .state`), shot("job-pending"))
	require.Equal(t, "PENDING", text(`#live .state`))
	eval(`window.notReloaded = true`)
	_, err = e.queues.ResumeQueue(ctx(t), connectReq(&jqv1.ResumeQueueRequest{Name: "default"}))
	require.NoError(t, err)
	do("job done, live", visible(`#live .state.done`), shot("job-done"))
	require.Equal(t, true, eval(`window.notReloaded === true`), "the page updated itself; it was not reloaded")
	require.Equal(t, "DONE", text(`#live .state`))

	// The queue's page charts the attempts finished per minute over the last hour.
	do("chart", chromedp.Navigate(e.ui+"/queues/default"), visible(`figure.chart svg g[data-minute] rect.done`), shot("queue-chart"))
	require.Contains(t, text(`figure.chart figcaption`), "done")

	// A running job's progress shows on its page and moves without a reload.
	slow := e.submit(t, &jqv1.JobSpec{Queue: "default", Type: "sleep", Payload: []byte(`{"ms":8000,"progress":8}`)})
	do("progress", chromedp.Navigate(e.ui+"/jobs/"+slow), visible(`#live [data-progress]`), shot("job-progress"))
	eval(`window.notReloaded = true`)
	first := text(`#live [data-progress]`)
	do("progress moves", chromedp.Poll[chromedp.Void](`(() => { const p = document.querySelector("#live [data-progress]"); return p && p.textContent !== `+
		strconv.Quote(first)+` })()`, chromedp.WithPollingTimeout(20*time.Second)))
	require.Equal(t, true, eval(`window.notReloaded === true`), "the progress moved without a reload")

	// The header search finds a job by the 8 characters every table shows. The page it leaves is a
	// job's page too, so the wait is for the address, not for a job page's heading.
	do("search by prefix",
		chromedp.SendKeys(chromedp.CSS(`.search input`), id[:8]),
		chromedp.Submit(chromedp.CSS(`.search input`)),
		waitPath("/jobs/"+id),
		chromedp.WaitVisible(chromedp.CSS(`h1 code.id`)),
	)
	require.Equal(t, "/jobs/"+id, eval(`location.pathname`))

	// Pause a queue from its page, through the confirmation dialog.
	do("pause queue",
		chromedp.Navigate(e.ui+"/queues/parked"),
		click(`form[action="/actions/queue-pause"] button`),
		visible(`#confirm-ok`),
		shot("pause-confirm"),
		click(`#confirm-ok`),
		visible(`.flash.ok`),
	)
	require.Equal(t, "queue parked paused", text(`.flash.ok`))
	require.True(t, e.queue(t, "parked").GetPaused())
	// Cancel in the dialog: nothing happens.
	do("cancel dialog",
		click(`form[action="/actions/queue-resume"] button`),
		visible(`#confirm-ok`),
		click(`#confirm button[value="cancel"]`),
		chromedp.WaitNotVisible(chromedp.CSS(`#confirm`)),
	)
	require.True(t, e.queue(t, "parked").GetPaused())

	// Change a queue's weights from its settings form, through the confirmation dialog. The
	// pause's flash goes first, so the flash waited for is the update's page's own.
	do("queue settings",
		chromedp.Evaluate[chromedp.Void](`document.querySelectorAll(".flash").forEach(e => e.remove()) || true`),
		chromedp.SetValue(chromedp.CSS(`form[action="/actions/queue-update"] input[name="weights"]`), "9=3,0=1"),
		click(`form[action="/actions/queue-update"] button`),
		visible(`#confirm-ok`),
		click(`#confirm-ok`),
		visible(`.flash.ok`),
	)
	require.Equal(t, "queue parked updated", text(`.flash.ok`))
	require.Equal(t, map[int32]int32{9: 3, 0: 1}, e.queue(t, "parked").GetPriorityWeights())

	// Retry a dead letter: from the dead-letter list to its page, then Retry.
	dead := e.submit(t, &jqv1.JobSpec{Queue: "parked", Type: "noop", Labels: map[string]string{"why": `<script>window.alerted=1</script>`}})
	_, err = e.jobs.CancelJob(ctx(t), connectReq(&jqv1.CancelJobRequest{JobId: dead}))
	require.NoError(t, err)
	do("retry dead letter",
		chromedp.Navigate(e.ui+"/dead?queue=parked"),
		visible(`a[href="/jobs/`+dead+`"]`),
		shot("dead-letters"),
		click(`a[href="/jobs/`+dead+`"]`),
		visible(`form[action="/actions/job-retry"] button`),
		click(`form[action="/actions/job-retry"] button`),
		visible(`#confirm-ok`),
		click(`#confirm-ok`),
		visible(`.flash.ok`),
	)
	require.Equal(t, "job "+dead+" retried: PENDING again", text(`.flash.ok`))
	require.Equal(t, jqv1.JobState_JOB_STATE_PENDING, e.job(t, dead).GetState())
	require.Equal(t, false, eval(`window.alerted !== undefined`), "a label's script did not run")

	// A bulk action says how many jobs it affects before it asks.
	for range 2 {
		d := e.submit(t, &jqv1.JobSpec{Queue: "parked", Type: "noop"})
		_, err = e.jobs.CancelJob(ctx(t), connectReq(&jqv1.CancelJobRequest{JobId: d}))
		require.NoError(t, err)
	}
	do("bulk count",
		chromedp.Navigate(e.ui+"/dead?queue=parked"),
		click(`form[action="/actions/jobs-bulk"] button`),
		visible(`#confirm-ok`),
		shot("bulk-count"),
	)
	require.Contains(t, text(`#confirm-text`), "It affects 2 jobs.")
	do("bulk count cancelled", click(`#confirm button[value="cancel"]`), chromedp.WaitNotVisible(chromedp.CSS(`#confirm`)))

	// The scheduled view: a delayed job, found through the filter form by its type.
	later := e.submit(t, &jqv1.JobSpec{Queue: "default", Type: "report.build", RunAt: timestamppb.New(time.Now().Add(time.Hour))})
	// A filter on the type walks the history within a time budget (150 ms: docs/console.md); on a
	// machine loaded by the whole suite the listing may answer "no full page within 150ms" once,
	// so the step is tried up to three times, with a screenshot of each failed try.
	for try := 1; ; try++ {
		ctx, cancel := context.WithTimeout(bctx, 15*time.Second)
		err := chromedp.Do(ctx,
			chromedp.Navigate(e.ui+"/scheduled"),
			chromedp.SendKeys(chromedp.CSS(`.filters input[name="type"]`), "report.build"),
			chromedp.Submit(chromedp.CSS(`.filters input[name="type"]`)),
			visible(`a[href="/jobs/`+later+`"]`),
			shot("scheduled"),
		)
		cancel()
		if err == nil {
			break
		}
		sctx, scancel := context.WithTimeout(bctx, 10*time.Second)
		_ = chromedp.Do(sctx, shot(fmt.Sprintf("scheduled-failed-%d", try)))
		scancel()
		require.Less(t, try, 3, "scheduled view: %v", err)
	}
	require.Contains(t, eval(`location.search`), "type=report.build")
	require.EqualValues(t, 1, eval(`document.querySelectorAll('#live tbody a[href^="/jobs/"]').length`), "only the delayed job")

	// Schedules: the list with next fires and last results; pause, resume and trigger from a
	// schedule's page; its edit form changes it through UpdateSchedule.
	_, err = e.schedules.CreateSchedule(ctx(t), connectReq(&jqv1.CreateScheduleRequest{Name: "nightly", Cron: "0 3 * * *",
		TimeZone: "Europe/Berlin", Template: &jqv1.JobTemplate{Queue: "parked", Type: "report.nightly"}}))
	require.NoError(t, err)
	do("schedules list",
		chromedp.Navigate(e.ui+"/schedules"),
		visible(`tr[data-schedule="nightly"] a[href="/schedules/nightly"]`),
		shot("schedules"),
	)
	require.Contains(t, text(`tr[data-schedule="nightly"] td.next`),
		e.schedule(t, "nightly").GetNextFireAt().AsTime().UTC().Format("2006-01-02 15:04"), "the next fire")
	pressOK := func(name, action string) {
		t.Helper()
		do(name,
			chromedp.Evaluate[chromedp.Void](`document.querySelectorAll(".flash").forEach(e => e.remove()) || true`),
			click(`form[action="/actions/`+action+`"] button`),
			visible(`#confirm-ok`),
			click(`#confirm-ok`),
			visible(`.flash.ok`),
		)
	}
	do("schedule page", click(`tr[data-schedule="nightly"] a[href="/schedules/nightly"]`), visible(`form[action="/actions/schedule-pause"]`))
	pressOK("pause schedule", "schedule-pause")
	require.Equal(t, "schedule nightly paused", text(`.flash.ok`))
	require.True(t, e.schedule(t, "nightly").GetPaused())
	pressOK("resume schedule", "schedule-resume")
	require.Equal(t, "schedule nightly resumed", text(`.flash.ok`))
	require.False(t, e.schedule(t, "nightly").GetPaused())
	pressOK("trigger schedule", "schedule-trigger")
	require.Contains(t, text(`.flash.ok`), "schedule nightly triggered: job ")
	do("edit schedule",
		chromedp.SetValue(chromedp.CSS(`form[action="/actions/schedule-update"] select[name="overlap"]`), "allow_all"),
		chromedp.SetValue(chromedp.CSS(`form[action="/actions/schedule-update"] input[name="ttl"]`), "1h"),
		chromedp.SetValue(chromedp.CSS(`form[action="/actions/schedule-update"] input[name="cron"]`), "30 4 * * *"),
		shot("schedule-edit"),
	)
	pressOK("save schedule", "schedule-update")
	require.Equal(t, "schedule nightly updated", text(`.flash.ok`))
	sc := e.schedule(t, "nightly")
	require.Equal(t, jqv1.OverlapPolicy_OVERLAP_POLICY_ALLOW_ALL, sc.GetOverlap())
	require.Equal(t, time.Hour, sc.GetTemplate().GetTtl().AsDuration())
	require.Equal(t, "30 4 * * *", sc.GetCron())
	require.Equal(t, "report.nightly", sc.GetTemplate().GetType(), "untouched fields stay")
	require.Equal(t, "allow_all", text(`#live dd.overlap`))
	// A refused edit says why and changes nothing.
	do("refused edit",
		chromedp.Evaluate[chromedp.Void](`document.querySelectorAll(".flash").forEach(e => e.remove()) || true`),
		chromedp.SetValue(chromedp.CSS(`form[action="/actions/schedule-update"] input[name="cron"]`), "61 * * * *"),
		click(`form[action="/actions/schedule-update"] button`),
		visible(`#confirm-ok`),
		click(`#confirm-ok`),
		visible(`.flash.err`),
	)
	require.Contains(t, text(`.flash.err`), `cron spec "61 * * * *"`)
	require.Equal(t, "30 4 * * *", e.schedule(t, "nightly").GetCron())

	// Delete a finished job from its page, through the dialog: back on the job list.
	gone := e.submit(t, &jqv1.JobSpec{Queue: "parked", Type: "noop"})
	_, err = e.jobs.CancelJob(ctx(t), connectReq(&jqv1.CancelJobRequest{JobId: gone}))
	require.NoError(t, err)
	do("delete a job",
		chromedp.Navigate(e.ui+"/jobs/"+gone),
		visible(`form[action="/actions/job-delete"] button`),
		click(`form[action="/actions/job-delete"] button`),
		visible(`#confirm-ok`),
		click(`#confirm-ok`),
		visible(`.flash.ok`),
	)
	require.Equal(t, "job "+gone+" deleted", text(`.flash.ok`))
	require.Equal(t, "/jobs", eval(`location.pathname`))
	_, err = e.jobs.GetJob(ctx(t), connectReq(&jqv1.GetJobRequest{JobId: gone}))
	require.Error(t, err, "deleted")

	// The overview at 1280 px, in dark mode and on a phone; the workers page.
	do("overview shots",
		chromedp.Navigate(e.ui+"/"),
		visible(`tr[data-queue="default"] svg polyline`), // two refreshes drew a sparkline
		shot("overview"),
		scheme("dark"),
		shot("overview-dark"),
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		shot("overview-phone"),
		chromedp.Navigate(e.ui+"/jobs/"+id),
		visible(`#live .state`),
		shot("job-phone-dark"),
		chromedp.EmulateViewport(1280, 900),
		scheme("light"),
		chromedp.Navigate(e.ui+"/workers"),
		visible(`form[action="/actions/worker-drain"]`),
		shot("workers"),
	)

	// A drained worker is put back to work from the workers page.
	_, err = e.workers.DrainWorker(ctx(t), connectReq(&jqv1.DrainWorkerRequest{WorkerId: "browser-w1"}))
	require.NoError(t, err)
	do("resume worker",
		chromedp.Navigate(e.ui+"/workers"),
		click(`form[action="/actions/worker-resume"] button`),
		visible(`#confirm-ok`),
		click(`#confirm-ok`),
		visible(`.flash.ok`),
	)
	require.Equal(t, "worker browser-w1 resumed: it takes new jobs again", text(`.flash.ok`))

	// A viewer sees the same pages without a single action.
	do("sign out", click(`.who button`))
	signIn("viewer")
	for _, p := range []string{"/", "/queues/parked", "/jobs", "/scheduled", "/jobs/" + dead, "/dead", "/workers", "/constraints",
		"/schedules", "/schedules/nightly"} {
		do("viewer "+p, chromedp.Navigate(e.ui+p), visible(`main h1`))
		require.EqualValues(t, 0, eval(`document.querySelectorAll('form[action^="/actions/"]').length`), "%s shows a viewer an action", p)
		require.EqualValues(t, 0, eval(`document.querySelectorAll('main button').length - document.querySelectorAll('.filters button').length`),
			"%s shows a viewer a button", p)
	}
	do("viewer shot", chromedp.Navigate(e.ui+"/queues/parked"), visible(`main h1`), shot("queue-viewer"))
}

// waitPath waits until the page's address is path. It polls from outside the page: a navigation
// destroys the page's context, which ends an in-page poll with an error.
func waitPath(path string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(20 * time.Second)
		var at string
		for {
			if v, err := chromedp.Evaluate[string](`location.pathname`)(ctx, tg); err == nil {
				if at = v; at == path {
					return nil
				}
			}
			select {
			case <-tick.C:
			case <-deadline:
				return fmt.Errorf("the page is at %q, not %q", at, path)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	})
}
