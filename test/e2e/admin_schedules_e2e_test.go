package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
)

// The schedule commands of the operator CLI against a real server.
func TestAdminSchedulesE2E(t *testing.T) {
	t.Parallel()
	_, a := newAdminE2E(t)
	a.ok("queue", "create", "reports")
	out := a.ok("schedule", "create", "nightly", "--cron", "0 3 * * *", "--tz", "Europe/Berlin", "--queue", "reports",
		"--type", "noop", "--payload", `{"report":"daily"}`, "--label", "team=ops", "--missed", "catch_up", "--catch-up-max", "2")
	require.Contains(t, out, "schedule nightly created: 0 3 * * * in Europe/Berlin")
	a.fails(1, `schedule "nightly" already exists`, "schedule", "create", "nightly", "--cron", "@daily")
	a.fails(2, "cron spec", "schedule", "create", "bad", "--cron", "61 * * * *")
	a.fails(2, "time zone", "schedule", "create", "bad", "--cron", "@daily", "--tz", "Mars/Base")
	// A refusal names the schedule once, says what is wrong and what to do.
	a.fails(2, `jq: cannot create schedule "bad": cron spec "bad": expected 5 to 6 fields, found 1: [bad]; e.g. --cron '*/5 * * * *'`,
		"schedule", "create", "bad", "--cron", "bad")
	a.fails(2, `jq: cannot create schedule "bad": cron spec "0 0 30 2 *" never fires: give a date that exists, e.g. '0 0 28 2 *'`,
		"schedule", "create", "bad", "--cron", "0 0 30 2 *")
	a.fails(2, `jq: cannot create schedule "bad": label jq.schedule is set by the schedule: remove it from the template`+"\n",
		"schedule", "create", "bad", "--cron", "@daily", "--label", "jq.schedule=x")

	show := a.ok("schedule", "show", "nightly")
	for _, want := range []string{"Europe/Berlin", "catch_up (at most 2)", "reports", "team=ops", "NEXT FIRES"} {
		require.Contains(t, show, want)
	}
	m := a.json([]string{"schedule", "next_fire_times"}, "schedule", "show", "nightly")
	require.Len(t, m["next_fire_times"], 5)

	// Update: only the flags given change, checked as create checks them; nothing changes when refused.
	out = a.ok("schedule", "update", "nightly", "--overlap", "buffer_one", "--ttl", "1h", "--keep-result", "--type", "digest")
	require.Contains(t, out, "schedule nightly updated: 0 3 * * * in Europe/Berlin, overlap buffer_one")
	show = a.ok("schedule", "show", "nightly")
	for _, want := range []string{"digest", "buffer_one", "1h0m0s", "catch_up (at most 2)", "team=ops", `{"report":"daily"}`} {
		require.Contains(t, show, want)
	}
	a.fails(2, "nothing to change", "schedule", "update", "nightly")
	a.fails(2, "--priority 10: want 0 to 9", "schedule", "update", "nightly", "--priority", "10")
	a.fails(2, "--priority 10: want 0 to 9", "schedule", "create", "other", "--cron", "@daily", "--priority", "10")
	a.fails(2, `cannot update schedule "nightly": cron spec "61 * * * *"`, "schedule", "update", "nightly", "--cron", "61 * * * *")
	a.fails(2, "--overlap \"never\": want skip, buffer_one or allow_all", "schedule", "update", "nightly", "--overlap", "never")
	a.fails(3, `schedule "nope" not found`, "schedule", "update", "nope", "--priority", "1")
	require.Contains(t, a.ok("schedule", "show", "nightly"), "digest", "a refused update changed nothing")

	a.ok("schedule", "create", "tick", "--cron", "@every 1s", "--queue", "reports")
	testenv.Eventually(t, 15*time.Second, func() error {
		if s := a.ok("schedule", "show", "tick"); !strings.Contains(s, "submitted") && !strings.Contains(s, "existing") {
			return fmt.Errorf("tick has not fired: %s", s)
		}
		return nil
	})
	require.Contains(t, a.ok("schedule", "pause", "tick"), "paused")
	list := a.ok("schedule", "list")
	require.Contains(t, list, "nightly")
	require.Contains(t, list, "paused")

	id := strings.TrimSpace(a.ok("schedule", "trigger", "nightly"))
	require.Len(t, id, 36)
	job := a.json([]string{"job"}, "job", "status", id)
	require.Contains(t, job["job"].(map[string]any)["labels"], "jq.schedule")

	require.Contains(t, a.ok("schedule", "resume", "tick"), "resumed")
	require.Contains(t, a.ok("schedule", "update", "tick", "--paused"), "paused", "update pauses too")
	require.Contains(t, a.ok("schedule", "update", "tick", "--paused=false"), "next fire")
	require.Contains(t, a.ok("schedule", "delete", "tick"), "deleted")
	a.fails(3, `schedule "tick" not found`, "schedule", "show", "tick")
	a.fails(3, `schedule "tick" not found`, "schedule", "delete", "tick")
}

// A schedule declared in JQ_SCHEDULES carries its overlap policy, ttl and keep_result, and is
// changed in the configuration, not by schedule update.
func TestAdminConfiguredScheduleE2E(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	se := c.startServer(`JQ_SCHEDULES=[{"name":"cfg","cron":"@hourly","queue":"default","type":"noop",` +
		`"ttl_s":90,"keep_result":true,"overlap":"allow_all"}]`)
	a := adminCLI{t: t, addr: se.Addr()}
	show := a.ok("schedule", "show", "cfg")
	for _, want := range []string{"allow_all", "1m30s", "config"} {
		require.Contains(t, show, want)
	}
	m := a.json([]string{"schedule"}, "schedule", "show", "cfg")
	tmpl := m["schedule"].(map[string]any)["template"].(map[string]any)
	require.Equal(t, true, tmpl["keep_result"])
	a.fails(1, "declared in the servers' configuration file: change it there", "schedule", "update", "cfg", "--priority", "1")
}
