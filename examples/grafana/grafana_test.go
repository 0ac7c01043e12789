// Package grafana_test checks the example dashboard and scrape configuration: they parse, the
// dashboard queries only metrics jq exports (docs/observability.md lists them), and the panels
// cover what an operator watches.
package grafana_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

type panel struct {
	ID      int                      `json:"id"`
	Type    string                   `json:"type"`
	Title   string                   `json:"title"`
	GridPos struct{ X, Y, W, H int } `json:"gridPos"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

func loadDashboard(t *testing.T) (uid string, panels []panel) {
	t.Helper()
	b, err := os.ReadFile("dashboard.json")
	require.NoError(t, err)
	var d struct {
		UID    string  `json:"uid"`
		Panels []panel `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(b, &d))
	return d.UID, d.Panels
}

var metricName = regexp.MustCompile(`\bjq_[a-z_]+`)

var documentedName = regexp.MustCompile("`(jq_[a-z_]+)")

// documentedMetrics are the metric names docs/observability.md names in code spans.
func documentedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../../docs/observability.md")
	require.NoError(t, err)
	out := map[string]bool{}
	for _, m := range documentedName.FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = true
	}
	require.NotEmpty(t, out, "docs/observability.md names no metric")
	return out
}

func TestDashboardQueriesDocumentedMetrics(t *testing.T) {
	uid, panels := loadDashboard(t)
	require.Equal(t, "jq-overview", uid)
	documented := documentedMetrics(t)
	ids := map[int]bool{}
	used := map[string]bool{}
	for _, p := range panels {
		require.False(t, ids[p.ID], "panel id %d repeats", p.ID)
		ids[p.ID] = true
		require.NotEmpty(t, p.Title, "panel %d has no title", p.ID)
		require.LessOrEqual(t, p.GridPos.X+p.GridPos.W, 24, "panel %q overflows the grid", p.Title)
		if p.Type == "row" {
			continue
		}
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		for _, tg := range p.Targets {
			require.Equal(t, strings.Count(tg.Expr, "("), strings.Count(tg.Expr, ")"), "unbalanced %q", tg.Expr)
			names := metricName.FindAllString(tg.Expr, -1)
			require.NotEmpty(t, names, "panel %q queries no jq metric: %q", p.Title, tg.Expr)
			for _, n := range names {
				base := n
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					if b, ok := strings.CutSuffix(n, suffix); ok && !documented[n] && documented[b] {
						base = b
					}
				}
				require.True(t, documented[base], "panel %q queries %s, which docs/observability.md does not list", p.Title, n)
				used[base] = true
			}
		}
	}
	// What the issue asks the dashboard to show.
	for _, want := range []string{
		"jq_job_queue_depth", "jq_job_total", "jq_jobs_failed_total", "jq_job_wait_duration_seconds",
		"jq_job_processing_duration_seconds", "jq_worker_active_count", "jq_worker_job_concurrency",
		"jq_kafka_publish_errors_total",
	} {
		require.True(t, used[want], "the dashboard does not show %s", want)
	}
}

func TestPanelsDoNotOverlap(t *testing.T) {
	_, panels := loadDashboard(t)
	type cell struct{ x, y int }
	taken := map[cell]string{}
	for _, p := range panels {
		for x := p.GridPos.X; x < p.GridPos.X+p.GridPos.W; x++ {
			for y := p.GridPos.Y; y < p.GridPos.Y+p.GridPos.H; y++ {
				c := cell{x, y}
				require.Empty(t, taken[c], "panels %q and %q overlap at %v", taken[c], p.Title, c)
				taken[c] = p.Title
			}
		}
	}
}

func TestScrapeConfig(t *testing.T) {
	b, err := os.ReadFile("prometheus.yml")
	require.NoError(t, err)
	var cfg struct {
		Global        map[string]string `yaml:"global"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			MetricsPath   string `yaml:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&cfg))
	targets := map[string][]string{}
	for _, sc := range cfg.ScrapeConfigs {
		require.Equal(t, "/metrics", sc.MetricsPath)
		for _, s := range sc.StaticConfigs {
			targets[sc.JobName] = append(targets[sc.JobName], s.Targets...)
		}
	}
	// compose.yaml's service names (internal/deploytest checks them against compose.yaml itself).
	require.True(t, slices.Contains(targets["jq-server"], "jq-server-1:9090"), "server metrics port 9090: %v", targets)
	require.True(t, slices.Contains(targets["jq-server"], "jq-server-2:9090"), "server metrics port 9090: %v", targets)
	require.True(t, slices.Contains(targets["jq-producer"], "jq-producer:9092"), "producer metrics port 9092: %v", targets)
	require.True(t, slices.Contains(targets["jq-worker"], "jq-worker:9091"), "worker metrics port 9091: %v", targets)
}
