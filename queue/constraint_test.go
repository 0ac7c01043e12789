package queue_test

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
)

var cnow = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func TestParseRate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want queue.RateLimit
	}{
		{"1/s", queue.RateLimit{Limit: 1, Interval: time.Second}},
		{"100/m", queue.RateLimit{Limit: 100, Interval: time.Minute}},
		{"5/h", queue.RateLimit{Limit: 5, Interval: time.Hour}},
		{"2/d", queue.RateLimit{Limit: 2, Interval: 24 * time.Hour}},
		{"100/10s", queue.RateLimit{Limit: 100, Interval: 10 * time.Second}},
		{"3/1.5s", queue.RateLimit{Limit: 3, Interval: 1500 * time.Millisecond}},
		{"7/1h30m", queue.RateLimit{Limit: 7, Interval: 90 * time.Minute}},
		{"1/1000µs", queue.RateLimit{Limit: 1, Interval: time.Millisecond}},
		{"100/m,burst=20", queue.RateLimit{Limit: 100, Interval: time.Minute, Burst: 20}},
		{"100/m,burst=0", queue.RateLimit{Limit: 100, Interval: time.Minute}},
		{" 100 / m , burst = 20 ", queue.RateLimit{Limit: 100, Interval: time.Minute, Burst: 20}},
		{"007/s", queue.RateLimit{Limit: 7, Interval: time.Second}},
		// Every bound, inclusive.
		{"1000000/s", queue.RateLimit{Limit: queue.MaxConstraintLimit, Interval: time.Second}},
		{"1/s,burst=1000000", queue.RateLimit{Limit: 1, Interval: time.Second, Burst: queue.MaxConstraintLimit}},
		{"1/1ms", queue.RateLimit{Limit: 1, Interval: queue.MinRateInterval}},
		{"1/24h", queue.RateLimit{Limit: 1, Interval: queue.MaxRateInterval}},
	} {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := queue.ParseRate(tc.in)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestParseRateErrors(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"",
		"100",
		"100/",
		"/s",
		"0/s",
		"1000001/s",
		"99999999999999999999/s",
		"-1/s",
		"1.5/s",
		"1/s,burst=1000001",
		"1/s,burst=99999999999999999999",
		"1/s,burst=-1",
		"1/s,burst=",
		"1/s,bust=2",
		"1/s;burst=2",
		"1/0s",
		"1/999µs",
		"1/1001µs", // not a whole number of milliseconds
		"1/999us",
		"1/24h0m0.000000001s",
		"1/25h",
		"1/2d",
		"1/1w",
		"1/S",
		"1/M",
		"1/sec",
		"1/minute",
		"1/10",
		"1/1..5s",
		"1/s/s",
		"1/s\t",
		"a/s",
		"garbage",
		"100/m,burst=5,burst=6",
		strings.Repeat("9", 1000) + "/s",
		"1/" + strings.Repeat("9", 1000) + "h",
		"1/" + strings.Repeat("x", 1000),
		"1/s,burst=" + strings.Repeat("9", 1000),
		strings.Repeat("garbage", 1000),
	} {
		t.Run(queue.Excerpt(in), func(t *testing.T) {
			t.Parallel()
			r, err := queue.ParseRate(in)
			require.ErrorIs(t, err, queue.ErrInvalidArgument, "got %+v", r)
			require.LessOrEqual(t, len(err.Error()), 250, "the message quotes an excerpt only")
		})
	}
}

func TestRateLimitString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		r    queue.RateLimit
		want string
	}{
		{queue.RateLimit{}, ""},
		{queue.RateLimit{Limit: 1, Interval: time.Second}, "1/s"},
		{queue.RateLimit{Limit: 100, Interval: time.Minute}, "100/m"},
		{queue.RateLimit{Limit: 5, Interval: time.Hour}, "5/h"},
		{queue.RateLimit{Limit: 2, Interval: 24 * time.Hour}, "2/d"},
		{queue.RateLimit{Limit: 100, Interval: 10 * time.Second}, "100/10s"},
		{queue.RateLimit{Limit: 3, Interval: 1500 * time.Millisecond}, "3/1.5s"},
		{queue.RateLimit{Limit: 7, Interval: 90 * time.Minute}, "7/1h30m0s"},
		{queue.RateLimit{Limit: 1, Interval: time.Millisecond}, "1/1ms"},
		{queue.RateLimit{Limit: 1, Interval: 2 * time.Minute, Burst: 9}, "1/2m0s,burst=9"},
		{queue.RateLimit{Limit: 100, Interval: time.Minute, Burst: 20}, "100/m,burst=20"},
	} {
		require.Equal(t, tc.want, tc.r.String(), "%+v", tc.r)
		if tc.r.IsZero() {
			continue
		}
		back, err := queue.ParseRate(tc.r.String())
		require.NoError(t, err, tc.want)
		require.Equal(t, tc.r, back, "round trip of %s", tc.want)
	}
	// Every interval within the bounds survives the round trip, odd ones included.
	for _, d := range []time.Duration{
		queue.MinRateInterval, 1001 * time.Millisecond, time.Second + time.Millisecond, 59 * time.Second,
		61 * time.Minute, 23*time.Hour + 59*time.Minute + 59*time.Second, queue.MaxRateInterval,
	} {
		r := queue.RateLimit{Limit: queue.MaxConstraintLimit, Interval: d, Burst: 1}
		back, err := queue.ParseRate(r.String())
		require.NoError(t, err, r.String())
		require.Equal(t, r, back, r.String())
	}
}

func TestRateLimitBucketSizeAndRefill(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		r      queue.RateLimit
		size   int
		refill time.Duration
	}{
		{queue.RateLimit{}, 0, 0},
		{queue.RateLimit{Limit: 100, Interval: time.Minute}, 100, time.Minute},
		{queue.RateLimit{Limit: 10, Interval: time.Minute, Burst: 5}, 5, 30 * time.Second},
		{queue.RateLimit{Limit: 1, Interval: time.Second, Burst: 3}, 3, 3 * time.Second},
		{queue.RateLimit{Limit: 2, Interval: 24 * time.Hour}, 2, 24 * time.Hour},
		{queue.RateLimit{Limit: 1000, Interval: time.Millisecond, Burst: 1}, 1, time.Microsecond},
	} {
		require.Equal(t, tc.size, tc.r.BucketSize(), "%+v", tc.r)
		require.Equal(t, tc.refill, tc.r.Refill(), "%+v", tc.r)
	}
	// A bucket touched Refill ago is full again.
	r := queue.RateLimit{Limit: 3, Interval: time.Second, Burst: 2}
	require.InDelta(t, 2, queue.TokensNow(r, queue.Bucket{Tokens: 0, At: cnow}, cnow.Add(r.Refill())), 1e-6)
	require.Equal(t, 2.0, queue.TokensNow(r, queue.Bucket{Tokens: 0, At: cnow}, cnow.Add(time.Hour)))
	require.Equal(t, 2.0, queue.TokensNow(r, queue.Bucket{}, cnow), "no bucket: full")
	require.Equal(t, 0.5, queue.TokensNow(r, queue.Bucket{Tokens: 0.5, At: cnow}, cnow.Add(-time.Minute)),
		"a bucket from the future does not drain")
}

// validConstraint is a constraint that passes Validate; each case breaks one thing.
func validConstraint() queue.Constraint {
	return queue.Constraint{
		Name:        "email-per-tenant",
		Match:       queue.JobMatcher{Queue: "emails", Type: "email.*", Labels: map[string]string{"env": "prod"}},
		Key:         "{{.labels.tenant}}",
		Concurrency: 5,
		Rate:        queue.RateLimit{Limit: 100, Interval: time.Minute},
	}
}

func manyLabels(n int) map[string]string {
	m := map[string]string{}
	for i := range n {
		m["l"+strings.Repeat("x", i)] = "v"
	}
	return m
}

func TestConstraintValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		mutate func(c *queue.Constraint)
		ok     bool
	}{
		{"valid", func(c *queue.Constraint) {}, true},
		{"name of one char", func(c *queue.Constraint) { c.Name = "a" }, true},
		{"name of 64 chars", func(c *queue.Constraint) { c.Name = strings.Repeat("a", 64) }, true},
		{"name with every allowed char", func(c *queue.Constraint) { c.Name = "0a_b.c-d9" }, true},
		{"empty name", func(c *queue.Constraint) { c.Name = "" }, false},
		{"name of 65 chars", func(c *queue.Constraint) { c.Name = strings.Repeat("a", 65) }, false},
		{"upper-case name", func(c *queue.Constraint) { c.Name = "Email" }, false},
		{"name starting with -", func(c *queue.Constraint) { c.Name = "-email" }, false},
		{"name starting with _", func(c *queue.Constraint) { c.Name = "_email" }, false},
		{"name starting with .", func(c *queue.Constraint) { c.Name = ".email" }, false},
		{"name with a colon", func(c *queue.Constraint) { c.Name = "a:b" }, false},
		{"name with a space", func(c *queue.Constraint) { c.Name = "a b" }, false},
		{"name with a slash", func(c *queue.Constraint) { c.Name = "a/b" }, false},
		{"name with a newline", func(c *queue.Constraint) { c.Name = "a\n" }, false},
		{"non-ASCII name", func(c *queue.Constraint) { c.Name = "ä" }, false},
		{"any queue", func(c *queue.Constraint) { c.Match.Queue = "" }, true},
		{"bad queue name", func(c *queue.Constraint) { c.Match.Queue = "Emails" }, false},
		{"queue name too long", func(c *queue.Constraint) { c.Match.Queue = strings.Repeat("q", 65) }, false},
		{"any type", func(c *queue.Constraint) { c.Match.Type = "" }, true},
		{"exact type", func(c *queue.Constraint) { c.Match.Type = "email.send" }, true},
		{"glob with ? and a class", func(c *queue.Constraint) { c.Match.Type = "?x[a-z]*" }, true},
		{"type of 256 bytes", func(c *queue.Constraint) { c.Match.Type = strings.Repeat("t", 256) }, true},
		{"type of 257 bytes", func(c *queue.Constraint) { c.Match.Type = strings.Repeat("t", 257) }, false},
		{"type not UTF-8", func(c *queue.Constraint) { c.Match.Type = "email.\xff" }, false},
		{"unclosed class", func(c *queue.Constraint) { c.Match.Type = "email.[" }, false},
		{"bad pattern after a literal that cannot match", func(c *queue.Constraint) { c.Match.Type = "x[" }, false},
		{"trailing backslash", func(c *queue.Constraint) { c.Match.Type = `email\` }, false},
		{"no labels", func(c *queue.Constraint) { c.Match.Labels = nil }, true},
		{"16 labels", func(c *queue.Constraint) { c.Match.Labels = manyLabels(queue.MaxConstraintLabels) }, true},
		{"17 labels", func(c *queue.Constraint) { c.Match.Labels = manyLabels(queue.MaxConstraintLabels + 1) }, false},
		{"empty label name", func(c *queue.Constraint) { c.Match.Labels = map[string]string{"": "v"} }, false},
		{"empty label value", func(c *queue.Constraint) { c.Match.Labels = map[string]string{"k": ""} }, true},
		{"label name of 256 bytes", func(c *queue.Constraint) { c.Match.Labels = map[string]string{strings.Repeat("k", 256): "v"} }, true},
		{"label name of 257 bytes", func(c *queue.Constraint) { c.Match.Labels = map[string]string{strings.Repeat("k", 257): "v"} }, false},
		{"label value of 1024 bytes", func(c *queue.Constraint) { c.Match.Labels = map[string]string{"k": strings.Repeat("v", 1024)} }, true},
		{"label value of 1025 bytes", func(c *queue.Constraint) { c.Match.Labels = map[string]string{"k": strings.Repeat("v", 1025)} }, false},
		{"label name not UTF-8", func(c *queue.Constraint) { c.Match.Labels = map[string]string{"k\xff": "v"} }, false},
		{"label value not UTF-8", func(c *queue.Constraint) { c.Match.Labels = map[string]string{"k": "\xff"} }, false},
		{"no key", func(c *queue.Constraint) { c.Key = "" }, true},
		{"payload key", func(c *queue.Constraint) { c.Key = "t-{{ .payload.customer.id }}" }, true},
		{"key template unclosed", func(c *queue.Constraint) { c.Key = "{{.labels.tenant" }, false},
		{"key template stray }}", func(c *queue.Constraint) { c.Key = "tenant}}" }, false},
		{"key template bad field", func(c *queue.Constraint) { c.Key = "{{.tenant}}" }, false},
		{"key template too long", func(c *queue.Constraint) { c.Key = strings.Repeat("k", queue.MaxKeyTemplateLen+1) }, false},
		{"concurrency only", func(c *queue.Constraint) { c.Rate = queue.RateLimit{} }, true},
		{"rate only", func(c *queue.Constraint) { c.Concurrency = 0 }, true},
		{"no limit", func(c *queue.Constraint) { c.Concurrency, c.Rate = 0, queue.RateLimit{} }, false},
		{"negative concurrency", func(c *queue.Constraint) { c.Concurrency = -1 }, false},
		{"largest concurrency", func(c *queue.Constraint) { c.Concurrency = queue.MaxConstraintLimit }, true},
		{"huge concurrency", func(c *queue.Constraint) { c.Concurrency = queue.MaxConstraintLimit + 1 }, false},
		{"negative rate", func(c *queue.Constraint) { c.Rate.Limit = -1 }, false},
		{"huge rate", func(c *queue.Constraint) { c.Rate.Limit = queue.MaxConstraintLimit + 1 }, false},
		{"rate without interval", func(c *queue.Constraint) { c.Rate.Interval = 0 }, false},
		{"interval without rate", func(c *queue.Constraint) { c.Rate.Limit = 0 }, false},
		{"burst without rate", func(c *queue.Constraint) { c.Rate = queue.RateLimit{Burst: 3} }, false},
		{"interval too short", func(c *queue.Constraint) { c.Rate.Interval = queue.MinRateInterval - 1 }, false},
		{"interval too long", func(c *queue.Constraint) { c.Rate.Interval = queue.MaxRateInterval + 1 }, false},
		{"negative interval", func(c *queue.Constraint) { c.Rate.Interval = -time.Second }, false},
		{"negative burst", func(c *queue.Constraint) { c.Rate.Burst = -1 }, false},
		{"largest burst", func(c *queue.Constraint) { c.Rate.Burst = queue.MaxConstraintLimit }, true},
		{"huge burst", func(c *queue.Constraint) { c.Rate.Burst = queue.MaxConstraintLimit + 1 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := validConstraint()
			tc.mutate(&c)
			err := c.Validate()
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, queue.ErrInvalidArgument)
			require.LessOrEqual(t, len(err.Error()), 300, "the message quotes an excerpt only")
		})
	}
}

func TestConstraintMatches(t *testing.T) {
	t.Parallel()
	job := func(q, typ string, labels map[string]string) *queue.Job {
		return &queue.Job{Queue: q, Type: typ, Labels: labels}
	}
	for _, tc := range []struct {
		name  string
		match queue.JobMatcher
		job   *queue.Job
		want  bool
	}{
		{"zero matcher selects every job", queue.JobMatcher{}, job("q", "t", nil), true},
		{"queue equal", queue.JobMatcher{Queue: "emails"}, job("emails", "t", nil), true},
		{"queue differs", queue.JobMatcher{Queue: "emails"}, job("emails2", "t", nil), false},
		{"exact type", queue.JobMatcher{Type: "email.send"}, job("q", "email.send", nil), true},
		{"exact type differs", queue.JobMatcher{Type: "email.send"}, job("q", "email.sent", nil), false},
		{"exact type is not a prefix", queue.JobMatcher{Type: "email"}, job("q", "email.send", nil), false},
		{"glob email.*", queue.JobMatcher{Type: "email.*"}, job("q", "email.send", nil), true},
		{"glob email.* with an empty rest", queue.JobMatcher{Type: "email.*"}, job("q", "email.", nil), true},
		{"glob email.* other type", queue.JobMatcher{Type: "email.*"}, job("q", "sms.send", nil), false},
		{"glob email.* needs the dot", queue.JobMatcher{Type: "email.*"}, job("q", "emails", nil), false},
		{"glob * stops at a slash", queue.JobMatcher{Type: "email.*"}, job("q", "email.a/b", nil), false},
		{"glob ?x", queue.JobMatcher{Type: "?x"}, job("q", "ax", nil), true},
		{"glob ?x needs one char", queue.JobMatcher{Type: "?x"}, job("q", "x", nil), false},
		{"glob ?x not two", queue.JobMatcher{Type: "?x"}, job("q", "abx", nil), false},
		{"glob ? is one rune", queue.JobMatcher{Type: "?x"}, job("q", "éx", nil), true},
		{"glob class", queue.JobMatcher{Type: "v[0-9]"}, job("q", "v7", nil), true},
		{"glob class miss", queue.JobMatcher{Type: "v[0-9]"}, job("q", "vx", nil), false},
		{"labels all equal", queue.JobMatcher{Labels: map[string]string{"a": "1", "b": "2"}},
			job("q", "t", map[string]string{"a": "1", "b": "2", "c": "3"}), true},
		{"one label differs", queue.JobMatcher{Labels: map[string]string{"a": "1", "b": "2"}},
			job("q", "t", map[string]string{"a": "1", "b": "3"}), false},
		{"one label missing", queue.JobMatcher{Labels: map[string]string{"a": "1", "b": "2"}},
			job("q", "t", map[string]string{"a": "1"}), false},
		{"an empty value is not a missing label", queue.JobMatcher{Labels: map[string]string{"a": ""}},
			job("q", "t", nil), false},
		{"an empty value matches an empty label", queue.JobMatcher{Labels: map[string]string{"a": ""}},
			job("q", "t", map[string]string{"a": ""}), true},
		{"every condition", queue.JobMatcher{Queue: "emails", Type: "email.*", Labels: map[string]string{"env": "prod"}},
			job("emails", "email.send", map[string]string{"env": "prod"}), true},
		{"every condition but the queue", queue.JobMatcher{Queue: "emails", Type: "email.*", Labels: map[string]string{"env": "prod"}},
			job("other", "email.send", map[string]string{"env": "prod"}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := &queue.Constraint{Name: "c", Match: tc.match, Concurrency: 1}
			require.NoError(t, c.Validate())
			require.Equal(t, tc.want, c.Matches(tc.job))
			if tc.match.Queue != "" {
				require.Equal(t, tc.job.Queue == tc.match.Queue, c.AppliesTo(tc.job.Queue))
			} else {
				require.True(t, c.AppliesTo(tc.job.Queue))
			}
		})
	}
}

func TestConstraintString(t *testing.T) {
	t.Parallel()
	c := validConstraint()
	c.Match.Labels["app"] = "web"
	require.Equal(t, "email-per-tenant: queue=emails type=email.* label:app=web label:env=prod key={{.labels.tenant}} concurrency=5 rate=100/m",
		c.String())
	require.Equal(t, "all: rate=1/s,burst=3",
		(&queue.Constraint{Name: "all", Rate: queue.RateLimit{Limit: 1, Interval: time.Second, Burst: 3}}).String())
}

func TestKeyTemplate(t *testing.T) {
	t.Parallel()
	labels := map[string]string{"tenant": "acme", "region": "eu", "empty": ""}
	obj := `{"customer":{"id":"c-42","n":7,"big":9007199254740993,"f":1.5,"e":1e21,"one":1.0,"vip":true,"no":false,
		"nil":null,"tags":["a",1],"addr":{"zip":"75001","city":"Paris"},"html":{"x":"<b>&"}},"flat":"x y","dash-key":"d","under_key":"u"}`
	for _, tc := range []struct {
		tmpl    string
		payload string
		want    string
		payl    bool
	}{
		{"", obj, "", false},
		{"global", obj, "global", false},
		{"{{.labels.tenant}}", obj, "acme", false},
		{"{{ .labels.tenant }}", obj, "acme", false},
		{"t-{{.labels.tenant}}/{{.labels.region}}-x", obj, "t-acme/eu-x", false},
		{"{{.labels.tenant}}{{.labels.tenant}}", obj, "acmeacme", false},
		{"{{.labels.missing}}", obj, "", false},
		{"[{{.labels.empty}}]", obj, "[]", false},
		{"a{b}c{d", obj, "a{b}c{d", false},
		{"}{", obj, "}{", false},
		{"{{.payload.flat}}", obj, "x y", true},
		{"{{ .payload.customer.id }}", obj, "c-42", true},
		{"{{\t.payload.customer.id\n}}", obj, "c-42", true},
		{"{{.payload.customer.addr.zip}}", obj, "75001", true},
		{"{{.payload.dash-key}}:{{.payload.under_key}}", obj, "d:u", true},
		{"{{.payload.customer.n}}", obj, "7", true},
		{"{{.payload.customer.big}}", obj, "9007199254740993", true},
		{"{{.payload.customer.f}}", obj, "1.5", true},
		{"{{.payload.customer.e}}", obj, "1e21", true},
		{"{{.payload.customer.one}}", obj, "1.0", true},
		{"{{.payload.customer.vip}}/{{.payload.customer.no}}", obj, "true/false", true},
		{"{{.payload.customer.tags}}", obj, `["a",1]`, true},
		{"{{.payload.customer.addr}}", obj, `{"city":"Paris","zip":"75001"}`, true},
		{"{{.payload.customer.nil}}", obj, "", true},
		{"{{.payload.missing}}", obj, "", true},
		{"{{.payload.customer.missing}}", obj, "", true},
		{"{{.payload.customer.id.deeper}}", obj, "", true},
		{"{{.payload.flat.deeper}}", obj, "", true},
		{"{{.payload.customer.tags.0}}", obj, "", true},
		{"{{.labels.tenant}}-{{.payload.customer.id}}", obj, "acme-c-42", true},
		{"{{.labels.tenant}}-{{.payload.x}}", "not json", "acme-", true},
		{"{{.payload.x}}", "", "", true},
		{"{{.payload.x}}", `{"x":1`, "", true},
		{"{{.payload.x}}", `{"x":1} trailing`, "", true},
		{"{{.payload.x}}", `{"x":1}{"x":2}`, "", true},
		{"{{.payload.x}}", `  {"x":"spaced"}  `, "spaced", true},
		{"{{.payload.x}}", `["x"]`, "", true},
		{"{{.payload.x}}", `"x"`, "", true},
		{"{{.payload.x}}", `42`, "", true},
		{"{{.payload.x}}", `null`, "", true},
		{"{{.payload.x}}", `{"x":"a","x":"b"}`, "b", true},
		{"{{.payload.x}}", "{\"x\":\"\xff\"}", "\uFFFD", true},
	} {
		t.Run(tc.tmpl+" "+tc.payload, func(t *testing.T) {
			t.Parallel()
			k, err := queue.ParseKeyTemplate(tc.tmpl)
			require.NoError(t, err)
			require.Equal(t, tc.payl, k.NeedsPayload())
			j := &queue.Job{Labels: labels, Payload: []byte(tc.payload)}
			require.Equal(t, tc.want, k.Key(j))
		})
	}
}

func TestKeyTemplateNoLabelsNoPayload(t *testing.T) {
	t.Parallel()
	k, err := queue.ParseKeyTemplate("k{{.labels.a}}{{.payload.b}}")
	require.NoError(t, err)
	require.Equal(t, "k", k.Key(&queue.Job{}))
}

func TestParseKeyTemplateErrors(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"{{",
		"{{.labels.tenant",
		"x{{.labels.tenant}}{{",
		"{{.labels.tenant}",
		"}}",
		"tenant}}",
		"a}}{{.labels.x}}",
		"{{.labels.x}}}}",
		"{{.labels.x}} }}",
		"{{}}",
		"{{ }}",
		"{{.labels}}",
		"{{.payload}}",
		"{{labels.x}}",
		"{{.label.x}}",
		"{{.Labels.x}}",
		"{{.tenant}}",
		"{{.labels.a.b}}",
		"{{.labels.}}",
		"{{.payload.a..b}}",
		"{{.payload.a.}}",
		"{{.payload..a}}",
		"{{.payload.a b}}",
		"{{.payload.é}}",
		"{{.labels.x|upper}}",
		"{{{.labels.x}}",
		"{{ {{.labels.x}} }}",
		"{{.labels.x}}\xff",
		strings.Repeat("k", queue.MaxKeyTemplateLen+1),
	} {
		t.Run(in, func(t *testing.T) {
			t.Parallel()
			_, err := queue.ParseKeyTemplate(in)
			require.ErrorIs(t, err, queue.ErrInvalidArgument)
			require.LessOrEqual(t, len(err.Error()), 300, "the message quotes an excerpt only")
		})
	}
	_, err := queue.ParseKeyTemplate(strings.Repeat("k", queue.MaxKeyTemplateLen))
	require.NoError(t, err, "a template of MaxKeyTemplateLen bytes")
}

func TestKeyTemplateCut(t *testing.T) {
	t.Parallel()
	k, err := queue.ParseKeyTemplate("{{.labels.v}}")
	require.NoError(t, err)
	n := queue.MaxConstraintKeyLen
	for _, tc := range []struct {
		name string
		v    string
		want string
	}{
		{"short", "acme", "acme"},
		{"exactly the limit", strings.Repeat("a", n), strings.Repeat("a", n)},
		{"one byte over", strings.Repeat("a", n+1), strings.Repeat("a", n)},
		{"far over", strings.Repeat("a", 10*n), strings.Repeat("a", n)},
		{"two-byte rune across the limit", strings.Repeat("a", n-1) + "é", strings.Repeat("a", n-1)},
		{"two-byte rune ending at the limit", strings.Repeat("a", n-2) + "éé", strings.Repeat("a", n-2) + "é"},
		{"three-byte runes", strings.Repeat("€", n/3+1), strings.Repeat("€", n/3)},
		{"four-byte rune across the limit", strings.Repeat("a", n-3) + "😀", strings.Repeat("a", n-3)},
		{"four-byte rune ending at the limit", strings.Repeat("a", n-4) + "😀😀", strings.Repeat("a", n-4) + "😀"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := k.Key(&queue.Job{Labels: map[string]string{"v": tc.v}})
			require.Equal(t, tc.want, got)
			require.LessOrEqual(t, len(got), n)
			require.True(t, utf8.ValidString(got))
		})
	}
	// The cut applies to the whole key, literals and fields together.
	lk, err := queue.ParseKeyTemplate("tenant-{{.labels.v}}-{{.payload.id}}")
	require.NoError(t, err)
	got := lk.Key(&queue.Job{Labels: map[string]string{"v": strings.Repeat("ü", n)}, Payload: []byte(`{"id":"x"}`)})
	require.Equal(t, "tenant-"+strings.Repeat("ü", (n-len("tenant-"))/2), got)
}

func TestLimitEntry(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ constraint, key, entry string }{
		{"c", "acme", "c:acme"},
		{"c", "", "c:"},
		{"c", "a:b:c", "c:a:b:c"},
		{"c", ":", "c::"},
		{"email-per-tenant", "eu/acme", "email-per-tenant:eu/acme"},
	} {
		require.Equal(t, tc.entry, queue.LimitEntry(tc.constraint, tc.key))
		c, k := queue.SplitLimitEntry(tc.entry)
		require.Equal(t, tc.constraint, c, tc.entry)
		require.Equal(t, tc.key, k, tc.entry)
	}
	c, k := queue.SplitLimitEntry("nocolon")
	require.Equal(t, "nocolon", c)
	require.Equal(t, "", k)
}

func TestConstraintSetFor(t *testing.T) {
	t.Parallel()
	a := &queue.Constraint{Name: "a"}
	b := &queue.Constraint{Name: "b", Match: queue.JobMatcher{Queue: "emails"}}
	c := &queue.Constraint{Name: "c", Match: queue.JobMatcher{Queue: "other"}}
	s := &queue.ConstraintSet{Gen: 3, Constraints: []*queue.Constraint{a, b, c}}
	require.Equal(t, []*queue.Constraint{a, b}, s.For("emails"))
	require.Equal(t, []*queue.Constraint{a, c}, s.For("other"))
	require.Equal(t, []*queue.Constraint{a}, s.For("x"))
	require.Empty(t, (&queue.ConstraintSet{}).For("x"))
	require.Empty(t, (&queue.ConstraintSet{Constraints: []*queue.Constraint{b}}).For("x"))
	require.True(t, s.Constrains("x"))
	require.False(t, (&queue.ConstraintSet{}).Constrains("x"))
	require.False(t, (&queue.ConstraintSet{Constraints: []*queue.Constraint{b}}).Constrains("x"))
	require.True(t, (&queue.ConstraintSet{Constraints: []*queue.Constraint{b}}).Constrains("emails"))
}

func TestNeedsPayload(t *testing.T) {
	t.Parallel()
	labels := &queue.Constraint{Name: "l", Key: "{{.labels.tenant}}"}
	none := &queue.Constraint{Name: "n"}
	payload := &queue.Constraint{Name: "p", Key: "x-{{ .payload.customer.id }}"}
	broken := &queue.Constraint{Name: "b", Key: "{{.payload.x"}
	require.False(t, queue.NeedsPayload(nil))
	require.False(t, queue.NeedsPayload([]*queue.Constraint{labels, none}))
	require.True(t, queue.NeedsPayload([]*queue.Constraint{labels, payload}))
	require.True(t, queue.NeedsPayload([]*queue.Constraint{payload}))
	require.False(t, queue.NeedsPayload([]*queue.Constraint{broken}), "a template that does not parse reads nothing")
}

func tenantJob(tenant string) *queue.Job {
	return &queue.Job{Queue: "emails", Type: "email.send", Labels: map[string]string{"tenant": tenant, "region": "eu"}}
}

func TestLimiterConcurrency(t *testing.T) {
	t.Parallel()
	c := &queue.Constraint{Name: "c", Key: "{{.labels.tenant}}", Concurrency: 2}
	for _, tc := range []struct {
		name    string
		running int
		admits  int
	}{
		{"none running", 0, 2},
		{"under the limit", 1, 1},
		{"at the limit", 2, 0},
		{"over the limit", 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := queue.NewLimiter([]*queue.Constraint{c}, map[string]int{"c:acme": tc.running, "c:busy": 2, "c:idle": 1}, nil, cnow)
			wantBlocked := []string{"c:busy"}
			if tc.running >= c.Concurrency {
				wantBlocked = []string{"c:acme", "c:busy"}
			}
			require.Equal(t, wantBlocked, l.Blocked(), "blocked from the start")

			e := l.Entries(tenantJob("acme"))
			require.Equal(t, []string{"c:acme"}, e)
			for i := range tc.admits {
				require.True(t, l.Admit(e), "start %d", i)
				require.Equal(t, tc.running+i+1 >= c.Concurrency, slices.Contains(l.Blocked(), "c:acme"),
					"blocked once the start reaches the limit (start %d)", i)
			}
			require.False(t, l.Admit(e))
			require.False(t, l.Admit(e))
			require.Equal(t, map[string]int{"c": 2}, l.Throttled())
			require.Equal(t, []string{"c:acme", "c:busy"}, l.Blocked())

			// Other keys have their own limit.
			require.True(t, l.Admit(l.Entries(tenantJob("idle"))))
			require.False(t, l.Admit(l.Entries(tenantJob("idle"))))
			require.True(t, l.Admit(l.Entries(tenantJob("new"))))
			require.False(t, l.Admit(l.Entries(tenantJob("busy"))))
			require.Equal(t, map[string]int{"c": 4}, l.Throttled())
			require.Equal(t, []string{"c:acme", "c:busy", "c:idle"}, l.Blocked())

			// A concurrency limit frees with a report, not at a time; no bucket is touched.
			require.True(t, l.RetryAt().IsZero())
			require.Empty(t, l.Buckets())
		})
	}
}

func TestLimiterTwoEntries(t *testing.T) {
	t.Parallel()
	tenant := &queue.Constraint{Name: "a-tenant", Key: "{{.labels.tenant}}", Concurrency: 1}
	region := &queue.Constraint{Name: "b-region", Key: "{{.labels.region}}", Rate: queue.RateLimit{Limit: 1, Interval: time.Minute}}
	cs := []*queue.Constraint{region, tenant}
	job := tenantJob("acme")
	t.Run("both allow", func(t *testing.T) {
		t.Parallel()
		l := queue.NewLimiter(cs, nil, nil, cnow)
		e := l.Entries(job)
		require.Equal(t, []string{"a-tenant:acme", "b-region:eu"}, e)
		require.True(t, l.Admit(e))
		require.Equal(t, []string{"a-tenant:acme", "b-region:eu"}, l.Blocked(), "both took their last slot")
		require.Equal(t, map[string]queue.Bucket{"b-region:eu": {Tokens: 0, At: cnow}}, l.Buckets())
		require.Equal(t, cnow.Add(time.Minute), l.RetryAt())
		require.Empty(t, l.Throttled())
	})
	t.Run("the concurrency refuses: no token taken", func(t *testing.T) {
		t.Parallel()
		l := queue.NewLimiter(cs, map[string]int{"a-tenant:acme": 1}, nil, cnow)
		require.False(t, l.Admit(l.Entries(job)))
		require.Empty(t, l.Buckets())
		require.True(t, l.RetryAt().IsZero())
		require.Equal(t, map[string]int{"a-tenant": 1}, l.Throttled())
		require.Equal(t, []string{"a-tenant:acme"}, l.Blocked())
		// The region's token is still there for another tenant.
		require.True(t, l.Admit(l.Entries(tenantJob("beta"))))
		require.Equal(t, map[string]queue.Bucket{"b-region:eu": {Tokens: 0, At: cnow}}, l.Buckets())
	})
	t.Run("the rate refuses: no slot taken", func(t *testing.T) {
		t.Parallel()
		l := queue.NewLimiter(cs, nil, map[string]queue.Bucket{"b-region:eu": {Tokens: 0.25, At: cnow}}, cnow)
		require.Equal(t, []string{"b-region:eu"}, l.Blocked())
		require.Equal(t, cnow.Add(45*time.Second), l.RetryAt())
		require.False(t, l.Admit(l.Entries(job)))
		require.Equal(t, map[string]int{"b-region": 1}, l.Throttled())
		require.Empty(t, l.Buckets())
		// The tenant's slot is still free.
		require.True(t, l.Admit([]string{"a-tenant:acme"}))
		require.False(t, l.Admit([]string{"a-tenant:acme"}))
		require.Equal(t, map[string]int{"a-tenant": 1, "b-region": 1}, l.Throttled())
	})
	t.Run("both refuse: the first entry's constraint counts", func(t *testing.T) {
		t.Parallel()
		l := queue.NewLimiter(cs, map[string]int{"a-tenant:acme": 1}, map[string]queue.Bucket{"b-region:eu": {Tokens: 0, At: cnow}}, cnow)
		require.False(t, l.Admit(l.Entries(job)))
		require.Equal(t, map[string]int{"a-tenant": 1}, l.Throttled())
	})
}

func TestLimiterIgnoresOtherConstraints(t *testing.T) {
	t.Parallel()
	c := &queue.Constraint{Name: "c", Key: "{{.labels.tenant}}", Concurrency: 1,
		Match: queue.JobMatcher{Type: "email.*"}}
	l := queue.NewLimiter([]*queue.Constraint{c},
		map[string]int{"gone:acme": 100, "c:acme": 0},
		map[string]queue.Bucket{"gone:acme": {Tokens: 0, At: cnow}, "c:acme": {Tokens: 0, At: cnow}}, cnow)
	require.Empty(t, l.Blocked(), "neither a running count nor a bucket of another constraint blocks")
	require.True(t, l.RetryAt().IsZero())
	for range 3 {
		require.True(t, l.Admit([]string{"gone:acme"}))
	}
	require.True(t, l.Admit(nil))
	require.True(t, l.Admit([]string{"gone:acme", "c:acme", "other:x"}))
	require.False(t, l.Admit([]string{"gone:acme", "c:acme"}))
	require.Equal(t, map[string]int{"c": 1}, l.Throttled())
	require.Equal(t, []string{"c:acme"}, l.Blocked())
	require.Empty(t, l.Buckets(), "c has no rate")

	require.Nil(t, l.Entries(&queue.Job{Type: "sms.send"}), "no constraint matches")
	require.Equal(t, []string{"c:x"}, l.Entries(&queue.Job{Type: "email.send", Labels: map[string]string{"tenant": "x"}}))

	empty := queue.NewLimiter(nil, nil, nil, cnow)
	require.Nil(t, empty.Entries(tenantJob("acme")))
	require.True(t, empty.Admit([]string{"c:acme"}))
	require.Empty(t, empty.Blocked())
	require.Empty(t, empty.Buckets())
	require.Empty(t, empty.Throttled())
}

func TestLimiterEntriesSorted(t *testing.T) {
	t.Parallel()
	var cs []*queue.Constraint
	for _, n := range []string{"m", "z", "a", "k"} {
		cs = append(cs, &queue.Constraint{Name: n, Key: n + "-{{.labels.tenant}}", Concurrency: 1})
	}
	cs = append(cs, &queue.Constraint{Name: "q", Match: queue.JobMatcher{Queue: "other"}, Concurrency: 1})
	l := queue.NewLimiter(cs, nil, nil, cnow)
	require.Equal(t, []string{"a:a-acme", "k:k-acme", "m:m-acme", "z:z-acme"}, l.Entries(tenantJob("acme")))
}

func TestLimiterRateBurst(t *testing.T) {
	t.Parallel()
	// Two tokens a second (one per 500ms), at most 3 kept: every time below is exact in binary.
	c := &queue.Constraint{Name: "r", Rate: queue.RateLimit{Limit: 2, Interval: time.Second, Burst: 3}}
	cs := []*queue.Constraint{c}
	l := queue.NewLimiter(cs, nil, nil, cnow)
	e := l.Entries(tenantJob("acme"))
	require.Equal(t, []string{"r:"}, e)
	for i := range 3 {
		require.Empty(t, l.Blocked(), "start %d", i)
		require.True(t, l.Admit(e), "start %d", i)
	}
	require.Equal(t, []string{"r:"}, l.Blocked(), "the last token taken blocks the entry")
	require.Equal(t, cnow.Add(500*time.Millisecond), l.RetryAt())
	require.False(t, l.Admit(e))
	require.Equal(t, map[string]int{"r": 1}, l.Throttled())
	stored := l.Buckets()
	require.Equal(t, map[string]queue.Bucket{"r:": {Tokens: 0, At: cnow}}, stored)

	for _, tc := range []struct {
		after  time.Duration
		admits int
		left   float64
		retry  time.Duration // after cnow
	}{
		{0, 0, 0, 500 * time.Millisecond},
		{-time.Second, 0, 0, 500 * time.Millisecond}, // a clock behind the bucket's
		{250 * time.Millisecond, 0, 0.5, 500 * time.Millisecond},
		{500 * time.Millisecond, 1, 0, time.Second},
		{750 * time.Millisecond, 1, 0.5, time.Second},
		{1250 * time.Millisecond, 2, 0.5, 1500 * time.Millisecond},
		{1500 * time.Millisecond, 3, 0, 2 * time.Second},
		{time.Hour, 3, 0, time.Hour + 500*time.Millisecond},
	} {
		t.Run(tc.after.String(), func(t *testing.T) {
			t.Parallel()
			now := cnow.Add(tc.after)
			l := queue.NewLimiter(cs, nil, maps.Clone(stored), now)
			require.Equal(t, tc.admits == 0, len(l.Blocked()) == 1, "blocked from the start")
			n := 0
			for l.Admit(e) {
				n++
				require.LessOrEqual(t, n, 3)
			}
			require.Equal(t, tc.admits, n)
			require.Equal(t, cnow.Add(tc.retry), l.RetryAt())
			require.Equal(t, map[string]int{"r": 1}, l.Throttled())
			if tc.admits == 0 {
				require.Empty(t, l.Buckets(), "no token taken: nothing to store")
			} else {
				require.Equal(t, map[string]queue.Bucket{"r:": {Tokens: tc.left, At: now}}, l.Buckets())
			}
		})
	}
}

// RetryAt is the first instant at which the bucket holds a token: a claim then admits, a claim a
// nanosecond earlier does not.
func TestLimiterRetryAtExact(t *testing.T) {
	t.Parallel()
	for _, r := range []queue.RateLimit{
		{Limit: 1, Interval: time.Second},
		{Limit: 3, Interval: time.Second, Burst: 1},
		{Limit: 1, Interval: time.Minute},
		{Limit: 100, Interval: time.Minute},
		{Limit: 7, Interval: 13 * time.Millisecond},
		{Limit: 3, Interval: 7 * time.Second, Burst: 2},
		{Limit: 5, Interval: time.Hour, Burst: 2},
		{Limit: 1_000_000, Interval: 24 * time.Hour, Burst: 1},
		{Limit: 999_999, Interval: time.Millisecond, Burst: 1},
		{Limit: 1, Interval: 24 * time.Hour},
	} {
		t.Run(r.String(), func(t *testing.T) {
			t.Parallel()
			cs := []*queue.Constraint{{Name: "r", Rate: r}}
			e := []string{"r:"}
			for _, start := range []float64{0, 0.1, 0.3, 0.5, 0.7, 0.123456789, 0.999, 0.9999999} {
				l := queue.NewLimiter(cs, nil, map[string]queue.Bucket{"r:": {Tokens: start, At: cnow}}, cnow)
				require.False(t, l.Admit(e))
				at := l.RetryAt()
				require.True(t, at.After(cnow), "start %v", start)

				early := queue.NewLimiter(cs, nil, map[string]queue.Bucket{"r:": {Tokens: start, At: cnow}}, at.Add(-time.Nanosecond))
				require.False(t, early.Admit(e), "start %v: a token at %v, a nanosecond before RetryAt %v", start,
					queue.TokensNow(r, queue.Bucket{Tokens: start, At: cnow}, at.Add(-time.Nanosecond)), at.Sub(cnow))

				onTime := queue.NewLimiter(cs, nil, map[string]queue.Bucket{"r:": {Tokens: start, At: cnow}}, at)
				require.True(t, onTime.Admit(e), "start %v: no token at RetryAt %v (%v)", start, at.Sub(cnow),
					queue.TokensNow(r, queue.Bucket{Tokens: start, At: cnow}, at))
			}
		})
	}
}

func TestLimiterRetryAtBucketAhead(t *testing.T) {
	t.Parallel()
	// A bucket stored by a clock ahead of this claim's does not fill before its At.
	r := queue.RateLimit{Limit: 2, Interval: time.Second}
	cs := []*queue.Constraint{{Name: "r", Rate: r}}
	stored := map[string]queue.Bucket{"r:": {Tokens: 0, At: cnow.Add(time.Second)}}
	l := queue.NewLimiter(cs, nil, maps.Clone(stored), cnow)
	require.False(t, l.Admit([]string{"r:"}))
	require.Equal(t, cnow.Add(1500*time.Millisecond), l.RetryAt())
	require.False(t, queue.NewLimiter(cs, nil, maps.Clone(stored), l.RetryAt().Add(-time.Nanosecond)).Admit([]string{"r:"}))
	require.True(t, queue.NewLimiter(cs, nil, maps.Clone(stored), l.RetryAt()).Admit([]string{"r:"}))
}

func TestLimiterRetryAtEarliest(t *testing.T) {
	t.Parallel()
	slow := &queue.Constraint{Name: "slow", Key: "{{.labels.tenant}}", Rate: queue.RateLimit{Limit: 1, Interval: time.Minute}}
	fast := &queue.Constraint{Name: "fast", Key: "{{.labels.tenant}}", Rate: queue.RateLimit{Limit: 1, Interval: time.Second}}
	l := queue.NewLimiter([]*queue.Constraint{slow, fast}, nil, map[string]queue.Bucket{
		"slow:a": {Tokens: 0, At: cnow},
		"fast:b": {Tokens: 0, At: cnow.Add(-500 * time.Millisecond)},
	}, cnow)
	require.Equal(t, cnow.Add(500*time.Millisecond), l.RetryAt(), "the earliest of every blocked entry")
	require.Equal(t, []string{"fast:b", "slow:a"}, l.Blocked())
}

func TestLimiterBuckets(t *testing.T) {
	t.Parallel()
	c := &queue.Constraint{Name: "r", Key: "{{.labels.tenant}}", Rate: queue.RateLimit{Limit: 10, Interval: time.Second}}
	l := queue.NewLimiter([]*queue.Constraint{c}, nil, map[string]queue.Bucket{
		"r:old":   {Tokens: 2, At: cnow.Add(-100 * time.Millisecond)}, // 3 tokens now
		"r:empty": {Tokens: 0, At: cnow},
		"r:kept":  {Tokens: 5, At: cnow.Add(-time.Second)}, // not used in this claim
	}, cnow)
	require.True(t, l.Admit([]string{"r:old"}))
	require.True(t, l.Admit([]string{"r:new"}))
	require.True(t, l.Admit([]string{"r:new"}))
	require.False(t, l.Admit([]string{"r:empty"}))
	got := l.Buckets()
	require.Len(t, got, 2)
	require.InDelta(t, 2, got["r:old"].Tokens, 1e-9)
	require.Equal(t, cnow, got["r:old"].At)
	require.Equal(t, queue.Bucket{Tokens: 8, At: cnow}, got["r:new"])
}

func TestLimiterConcurrencyAndRate(t *testing.T) {
	t.Parallel()
	c := &queue.Constraint{Name: "c", Concurrency: 2, Rate: queue.RateLimit{Limit: 1, Interval: time.Second, Burst: 5}}
	l := queue.NewLimiter([]*queue.Constraint{c}, nil, nil, cnow)
	require.True(t, l.Admit([]string{"c:"}))
	require.True(t, l.Admit([]string{"c:"}))
	require.False(t, l.Admit([]string{"c:"}))
	require.True(t, l.RetryAt().IsZero(), "held by the concurrency, which frees with a report")
	require.Equal(t, map[string]queue.Bucket{"c:": {Tokens: 3, At: cnow}}, l.Buckets())

	// Slots free but no token: the rate holds it, and says when.
	l = queue.NewLimiter([]*queue.Constraint{c}, map[string]int{"c:": 1}, map[string]queue.Bucket{"c:": {Tokens: 0, At: cnow}}, cnow)
	require.False(t, l.Admit([]string{"c:"}))
	require.Equal(t, cnow.Add(time.Second), l.RetryAt())
}

func TestLimiterBlockedSorted(t *testing.T) {
	t.Parallel()
	c := &queue.Constraint{Name: "c", Key: "{{.labels.tenant}}", Concurrency: 1}
	r := &queue.Constraint{Name: "b", Key: "{{.labels.tenant}}", Rate: queue.RateLimit{Limit: 1, Interval: time.Second}}
	l := queue.NewLimiter([]*queue.Constraint{c, r},
		map[string]int{"c:zeta": 1, "c:alpha": 3, "c:mid": 0},
		map[string]queue.Bucket{"b:m": {Tokens: 0, At: cnow}, "b:a": {Tokens: 1, At: cnow}}, cnow)
	require.Equal(t, []string{"b:m", "c:alpha", "c:zeta"}, l.Blocked())
	require.True(t, l.Admit([]string{"c:beta"}))
	require.True(t, l.Admit([]string{"b:a"}))
	require.Equal(t, []string{"b:a", "b:m", "c:alpha", "c:beta", "c:zeta"}, l.Blocked())
}

func TestConstraintDescribe(t *testing.T) {
	t.Parallel()
	keyed := &queue.Constraint{Name: "email-per-tenant", Key: "{{.labels.tenant}}", Concurrency: 5,
		Rate: queue.RateLimit{Limit: 100, Interval: time.Minute}}
	global := &queue.Constraint{Name: "all", Concurrency: 2}
	rateOnly := &queue.Constraint{Name: "r", Key: "{{.labels.tenant}}", Rate: queue.RateLimit{Limit: 1, Interval: time.Second, Burst: 3}}
	for _, tc := range []struct {
		name string
		c    *queue.Constraint
		key  string
		u    queue.ConstraintKeyUsage
		want string
	}{
		{"at the concurrency", keyed, "acme", queue.ConstraintKeyUsage{Key: "acme", Running: 5, Tokens: 100},
			"limited by constraint email-per-tenant, key acme: 5/5 running"},
		{"over the concurrency", keyed, "acme", queue.ConstraintKeyUsage{Key: "acme", Running: 7, Tokens: 0},
			"limited by constraint email-per-tenant, key acme: 7/5 running"},
		{"no token", keyed, "acme", queue.ConstraintKeyUsage{Key: "acme", Running: 4, Tokens: 0},
			"limited by constraint email-per-tenant, key acme: rate 100/m, next start in 600ms"},
		{"half a token", keyed, "acme", queue.ConstraintKeyUsage{Key: "acme", Running: 0, Tokens: 0.5},
			"limited by constraint email-per-tenant, key acme: rate 100/m, next start in 300ms"},
		{"one token", keyed, "acme", queue.ConstraintKeyUsage{Key: "acme", Running: 4, Tokens: 1}, ""},
		{"idle", keyed, "acme", queue.ConstraintKeyUsage{Key: "acme", Tokens: 100}, ""},
		{"the single key", global, "", queue.ConstraintKeyUsage{Running: 2},
			"limited by constraint all, key (all): 2/2 running"},
		{"the single key, free", global, "", queue.ConstraintKeyUsage{Running: 1}, ""},
		{"no rate: tokens do not matter", global, "", queue.ConstraintKeyUsage{Running: 1, Tokens: 0}, ""},
		{"no concurrency: running does not matter", rateOnly, "acme", queue.ConstraintKeyUsage{Running: 1000, Tokens: 1}, ""},
		{"burst shown", rateOnly, "acme", queue.ConstraintKeyUsage{Tokens: 0.25},
			"limited by constraint r, key acme: rate 1/s,burst=3, next start in 750ms"},
	} {
		require.Equal(t, tc.want, tc.c.Describe(tc.key, tc.u, 0), tc.name)
	}
	// Jobs of the key before this one take the next tokens first: each job its own estimate.
	u := queue.ConstraintKeyUsage{Key: "acme", Tokens: 0.5}
	require.Equal(t, "limited by constraint email-per-tenant, key acme: rate 100/m, next start in 900ms, 1 job of the key before it",
		keyed.Describe("acme", u, 1))
	require.Equal(t, "limited by constraint email-per-tenant, key acme: rate 100/m, next start in 1.5s, 2 jobs of the key before it",
		keyed.Describe("acme", u, 2))
	require.Equal(t, "limited by constraint r, key acme: rate 1/s,burst=3, next start in 1s, 2 jobs of the key before it",
		rateOnly.Describe("acme", queue.ConstraintKeyUsage{Tokens: 2}, 2), "two tokens for the two before it")
}
