package console_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
)

// The schedules pages: the list with each schedule's next fire and last result, a schedule's page
// with its actions for an admin, and its edit form refusing what UpdateSchedule refuses.
func TestConsoleSchedules(t *testing.T) {
	e := start(t)
	_, err := e.schedules.CreateSchedule(ctx(t), connectReq(&jqv1.CreateScheduleRequest{Name: "hourly", Cron: "@hourly",
		Template: &jqv1.JobTemplate{Queue: "default", Type: "noop"}}))
	require.NoError(t, err)
	b := e.signedIn(t, "admin")
	resp, body := b.get("/schedules", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `href="/schedules/hourly"`)
	resp, body = b.get("/schedules/hourly", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	for _, action := range []string{"schedule-pause", "schedule-trigger", "schedule-delete", "schedule-update"} {
		require.Contains(t, body, `action="/actions/`+action+`"`)
	}
	v := e.signedIn(t, "viewer")
	resp, body = v.get("/schedules/hourly", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.NotContains(t, body, `action="/actions/schedule-`)

	form := url.Values{"name": {"hourly"}, "cron": {"@hourly"}, "queue": {"default"}, "type": {"noop"}, "overlap": {"buffer_one"},
		"ttl": {"90s"}, "keep_result": {"yes"}, "confirmed": {"yes"}, "csrf": {b.csrf()}}
	resp, _ = b.post("/actions/schedule-update", form, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	sc := e.schedule(t, "hourly")
	require.Equal(t, jqv1.OverlapPolicy_OVERLAP_POLICY_BUFFER_ONE, sc.GetOverlap())
	require.True(t, sc.GetTemplate().GetKeepResult())
	form.Set("priority", "12")
	b.post("/actions/schedule-update", form, nil)
	require.EqualValues(t, 0, e.schedule(t, "hourly").GetTemplate().GetPriority(), "refused: nothing changed")
}
