package config_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/config"
)

func TestSchedulesFromFile(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, `
schedules:
  - name: nightly
    cron: "0 3 * * *"
    time_zone: Europe/Berlin
    queue: reports
    type: exec
    payload: {argv: ["/usr/local/bin/report", "--daily"]}
    max_retries: 2
    timeout_s: 600
    ttl_s: 3600
    keep_result: true
    overlap: buffer_one
    labels: {team: ops}
  - name: tick
    cron: "@every 30s"
    missed: catch_up
    catch_up_max: 5
    queue: default
    type: noop
    payload: '{"n":1}'
`)
	cfg, _ := load(t, config.LoadOptions{File: path})
	require.Len(t, cfg.Schedules, 2)
	n := cfg.Schedules[0]
	require.Equal(t, "nightly", n.Name)
	require.Equal(t, "Europe/Berlin", n.TimeZone)
	require.JSONEq(t, `{"argv":["/usr/local/bin/report","--daily"]}`, n.Payload)
	require.Equal(t, 2, *n.MaxRetries)
	require.Equal(t, 600, n.TimeoutS)
	require.Equal(t, time.Hour, n.TTL())
	require.True(t, n.KeepResult)
	require.Equal(t, "buffer_one", n.Overlap)
	require.Equal(t, map[string]string{"team": "ops"}, n.Labels)
	require.Equal(t, "catch_up", cfg.Schedules[1].Missed)
	require.Equal(t, `{"n":1}`, cfg.Schedules[1].Payload)

	// Printed and read again: the same list.
	out, err := cfg.YAML()
	require.NoError(t, err)
	again, _ := load(t, config.LoadOptions{File: writeConfig(t, string(out))})
	require.Equal(t, cfg.Schedules, again.Schedules)
	red := cfg.Redacted()
	require.Equal(t, cfg.Schedules, red.Schedules)
}

func TestSchedulesFromEnv(t *testing.T) {
	t.Parallel()
	cfg, _ := load(t, config.LoadOptions{Environ: []string{
		`JQ_SCHEDULES=[{"name":"tick","cron":"@every 1s","queue":"default","type":"noop"}]`,
	}})
	require.Len(t, cfg.Schedules, 1)
	require.Equal(t, "@every 1s", cfg.Schedules[0].Cron)

	cfg, _ = load(t, config.LoadOptions{Environ: []string{
		`JQ_SCHEDULES=[{"name":"tick","cron":"@every 1s","queue":"default","type":"noop","ttl_s":60,"keep_result":true,"overlap":"allow_all"}]`,
	}})
	require.Equal(t, time.Minute, cfg.Schedules[0].TTL())
	require.True(t, cfg.Schedules[0].KeepResult)
	require.Equal(t, "allow_all", cfg.Schedules[0].Overlap)
}

// JQ_SCHEDULES takes a payload as a mapping, as the file does (stored as its JSON), or as text.
func TestSchedulesFromEnvPayloadMapping(t *testing.T) {
	t.Parallel()
	cfg, _ := load(t, config.LoadOptions{Environ: []string{
		`JQ_SCHEDULES=[{"name":"t","cron":"@every 3s","queue":"default","type":"noop","payload":{"a":1}},` +
			`{"name":"u","cron":"@every 3s","queue":"default","type":"noop","payload":"{\"b\":2}"}]`,
	}})
	require.Len(t, cfg.Schedules, 2)
	require.JSONEq(t, `{"a":1}`, cfg.Schedules[0].Payload)
	require.JSONEq(t, `{"b":2}`, cfg.Schedules[1].Payload)
	err := loadErr(t, config.LoadOptions{Environ: []string{`JQ_SCHEDULES=[{"name":"t","cron":"@hourly","queue":"q","type":"t","colour":1}]`}})
	require.Contains(t, err.Error(), "unknown field")
}

func TestSchedulesRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ want, yaml string }{
		{"schedules[0].cron", `[{name: a, cron: "61 * * * *", queue: q, type: t}]`},
		{"schedules[0].cron", `[{name: a, cron: "0 3 * * *", time_zone: Mars/Base, queue: q, type: t}]`},
		{"schedules[1].name", `[{name: a, cron: "@hourly", queue: q, type: t}, {name: a, cron: "@hourly", queue: q, type: t}]`},
		{"schedules[0].missed", `[{name: a, cron: "@hourly", queue: q, type: t, missed: later}]`},
		{"schedules[0].queue", `[{name: a, cron: "@hourly", queue: "Q!", type: t}]`},
		{"schedules[0].type", `[{name: a, cron: "@hourly", queue: q}]`},
		{"schedules[0].priority", `[{name: a, cron: "@hourly", queue: q, type: t, priority: 12}]`},
		{"schedules", `[{name: a, cron: "@hourly", queue: q, type: t, colour: blue}]`},
		{"schedules[0].overlap", `[{name: a, cron: "@hourly", queue: q, type: t, overlap: sometimes}]`},
		{"schedules[0].ttl_s", `[{name: a, cron: "@hourly", queue: q, type: t, ttl_s: -1}]`},
		{"schedules[0].payload: 40 bytes: at most server.max_payload_bytes (32)",
			`[{name: a, cron: "@hourly", queue: q, type: t, payload: "0123456789012345678901234567890123456789"}]
server: {max_payload_bytes: 32}`},
	} {
		err := loadErr(t, config.LoadOptions{File: writeConfig(t, "schedules: "+tc.yaml+"\n")})
		require.Contains(t, err.Error(), tc.want, tc.yaml)
	}
}
