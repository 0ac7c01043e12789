package console

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
)

// pageNames are the templates in web/templates, each rendered inside layout.html.
var pageNames = []string{"login", "overview", "queue", "jobs", "job", "dead", "scheduled", "workers", "constraints", "constraint", "schedules", "schedule", "error"}

type pages struct{ byName map[string]*template.Template }

func parsePages() (*pages, error) {
	p := &pages{byName: map[string]*template.Template{}}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(webFS, "web/templates/layout.html", "web/templates/partials.html", "web/templates/"+name+".html")
		if err != nil {
			return nil, err
		}
		p.byName[name] = t
	}
	return p, nil
}

// view is what every template gets.
type view struct {
	Title   string
	Nav     string // the navigation entry to highlight
	User    string // the principal's name; "" with authentication off
	Roles   string
	AuthOff bool
	CSRF    string
	Flash   string
	FlashOK bool
	// Live makes the page's script refresh its live part (polling with backoff).
	Live bool
	Now  time.Time
	Data any
	u    *user
}

// Can reports whether the user's roles allow the RPC named (e.g. "PauseQueue"); actions they may
// not use are not shown. The API decides again when the action is taken.
func (v *view) Can(rpc string) bool {
	proc, ok := procedures[rpc]
	if !ok {
		panic("console: template asks for unknown rpc " + rpc) // a template bug, caught by the handler tests
	}
	return v.u != nil && v.u.can(proc)
}

const flashCookie = "jq_flash"

// flash leaves a one-line outcome for the next page; the cookie holds no secret.
func (c *Console) flash(w http.ResponseWriter, ok bool, msg string) {
	kind := "err:"
	if ok {
		kind = "ok:"
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: url.QueryEscape(kind + oneLine(msg, 500)), Path: "/", //nolint:gosec // Secure follows the listener (set over TLS); a plain-HTTP console on loopback must still get its cookie
		HttpOnly: true, Secure: c.secure, SameSite: http.SameSiteStrictMode, MaxAge: 60})
}

func (c *Console) takeFlash(w http.ResponseWriter, r *http.Request, v *view) {
	ck, err := r.Cookie(flashCookie)
	if err != nil {
		return
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Path: "/", MaxAge: -1, HttpOnly: true, Secure: c.secure, //nolint:gosec // Secure follows the listener (set over TLS); a plain-HTTP console on loopback must still get its cookie
		SameSite: http.SameSiteStrictMode})
	s, err := url.QueryUnescape(ck.Value)
	if err != nil {
		return
	}
	if m, ok := strings.CutPrefix(s, "ok:"); ok {
		v.Flash, v.FlashOK = m, true
	} else if m, ok := strings.CutPrefix(s, "err:"); ok {
		v.Flash = m
	}
}

// render writes a page, or only its live part for the page script's refresh.
func (c *Console) render(w http.ResponseWriter, r *http.Request, u *user, status int, name string, v view) {
	v.u, v.Now = u, c.now().UTC()
	if u != nil {
		v.CSRF = u.csrf
		if u.principal == nil {
			v.AuthOff = c.auth == nil
		} else {
			v.User = u.principal.Name
			roles := make([]string, len(u.principal.Roles))
			for i, ro := range u.principal.Roles {
				roles[i] = string(ro)
			}
			v.Roles = strings.Join(roles, ", ")
		}
	}
	tmpl := "layout"
	if isLive(r) {
		tmpl = "live"
	} else {
		c.takeFlash(w, r, &v)
	}
	var buf bytes.Buffer
	if err := c.pages.byName[name].ExecuteTemplate(&buf, tmpl, &v); err != nil {
		c.log.Error("console page not rendered", zap.String("page", name), zap.Error(err))
		http.Error(w, "internal error: page not rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail renders an API error as the page.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, u *user, title string, err error) {
	c.render(w, r, u, httpStatus(err), "error", view{Title: title, Data: errorLine(err)})
}

func oneLine(s string, limit int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > limit {
		s = s[:limit] + "…"
	}
	return s
}

var funcs = template.FuncMap{
	"when":       when,
	"outcome":    scheduleOutcome,
	"overlap":    overlapWord,
	"ago":        ago,
	"dur":        dur,
	"state":      stateName,
	"stateClass": func(s jqv1.JobState) string { return strings.ToLower(stateName(s)) },
	"workerStatus": func(s jqv1.WorkerStatus) string {
		return strings.TrimPrefix(s.String(), "WORKER_STATUS_")
	},
	"breaker": func(s jqv1.CircuitBreakerState) string {
		return strings.ToLower(strings.TrimPrefix(s.String(), "CIRCUIT_BREAKER_STATE_"))
	},
	"pct":        func(f float64) string { return fmt.Sprintf("%.1f%%", f*100) },
	"path":       url.PathEscape,
	"rd":         roundDur,
	"done":       doneCount,
	"throughput": throughput,
	"chart":      chartOf,
	"minuteFail": minuteFail,
	"rate":       rateText,
	"keyRunning": keyRunning,
	"tokens":     func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	"delayed": func(j *jqv1.Job, now time.Time) bool {
		return j.GetState() == jqv1.JobState_JOB_STATE_PENDING && j.GetNotBefore().AsTime().After(now)
	},
}

// doneCount is a queue's DONE count, "≈ n" when the server estimated it (past 10,000 DONE jobs it
// does not count the history).
func doneCount(s *jqv1.QueueStats) string {
	n := strconv.FormatInt(s.GetDone(), 10)
	if s.GetDoneEstimated() {
		return "≈ " + n
	}
	return n
}

// throughput is the attempts finished per second over the last minute (the window when shorter).
func throughput(s *jqv1.QueueStats) float64 {
	span := min(time.Minute, s.GetWindow().AsDuration())
	if span <= 0 {
		return 0
	}
	return float64(s.GetFinishedLastMinute()) / span.Seconds()
}

// minuteFail is the share of the last minute's finished attempts that failed.
func minuteFail(s *jqv1.QueueStats) float64 {
	if s.GetFinishedLastMinute() == 0 {
		return 0
	}
	return float64(s.GetFailedLastMinute()) / float64(s.GetFinishedLastMinute())
}

func stateName(s jqv1.JobState) string { return strings.TrimPrefix(s.String(), "JOB_STATE_") }

// when shows a time in UTC (the tooltip and datetime carry it exactly); zero is a dash.
func when(ts *timestamppb.Timestamp) template.HTML {
	if ts == nil || ts.AsTime().IsZero() {
		return "—"
	}
	t := ts.AsTime().UTC()
	return template.HTML(`<time datetime="` + t.Format(time.RFC3339Nano) + `">` + t.Format("2006-01-02 15:04:05") + `Z</time>`) //nolint:gosec // a formatted time only
}

// ago is the relative hint beside a time: "3m ago", "in 20s".
func ago(ts *timestamppb.Timestamp, now time.Time) string {
	if ts == nil || ts.AsTime().IsZero() {
		return ""
	}
	d := now.Sub(ts.AsTime())
	if d < 0 {
		return "in " + short(-d)
	}
	return short(d) + " ago"
}

func short(d time.Duration) string {
	switch {
	case d < time.Second:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

func dur(d *durationpb.Duration) string {
	if d == nil {
		return "—"
	}
	return roundDur(d.AsDuration()).String()
}

func roundDur(d time.Duration) time.Duration {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	default:
		return d
	}
}
