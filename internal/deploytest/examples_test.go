package deploytest

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// The example Prometheus configuration points Kubernetes users at the chart's monitor: the kind
// it names must be one the chart makes.
func TestPrometheusExampleNamesTheChartsMonitor(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	example, err := os.ReadFile(filepath.Join(root, "examples/grafana/prometheus.yml"))
	require.NoError(t, err)
	named := regexp.MustCompile(`Helm chart's (\w+)`).FindAllStringSubmatch(string(example), -1)
	require.NotEmpty(t, named, "the example no longer mentions the chart")
	templates, err := filepath.Glob(filepath.Join(root, "deploy/helm/jq/templates/*.yaml"))
	require.NoError(t, err)
	kinds := map[string]bool{}
	for _, f := range templates {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range regexp.MustCompile(`(?m)^kind:\s*(\w+)`).FindAllStringSubmatch(string(b), -1) {
			kinds[m[1]] = true
		}
	}
	for _, m := range named {
		require.True(t, kinds[m[1]], "examples/grafana/prometheus.yml names the chart's %s; the chart makes %v", m[1], kinds)
	}
}
