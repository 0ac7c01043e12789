package deploytest

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/jq-dev/jq/config"
)

// loadCompose loads compose.yaml as `docker compose --profile producer config` would: unknown keys
// and dangling references fail, variables are interpolated from an empty environment (so the
// file's defaults are what is checked).
func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	root := repoRoot(t)
	opts, err := cli.NewProjectOptions([]string{filepath.Join(root, "compose.yaml")},
		cli.WithWorkingDirectory(root), cli.WithEnv([]string{}), cli.WithProfiles([]string{"producer"}),
		cli.WithInterpolation(true), cli.WithConsistency(true))
	require.NoError(t, err)
	p, err := opts.LoadProject(context.Background())
	require.NoError(t, err)
	return p
}

// cliEnvVars are the JQ_ variables the command line itself reads (kong `env:"…"` tags in roles/),
// besides the configuration keys.
func cliEnvVars(t *testing.T) map[string]bool {
	t.Helper()
	tag := regexp.MustCompile(`env:"(JQ_[A-Z0-9_]+)"`)
	out := map[string]bool{}
	for _, dir := range []string{"roles", "roles/admin"} {
		files, err := filepath.Glob(filepath.Join(repoRoot(t), dir, "*.go"))
		require.NoError(t, err)
		for _, f := range files {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			for _, m := range tag.FindAllStringSubmatch(string(b), -1) {
				out[m[1]] = true
			}
		}
	}
	require.True(t, out["JQ_ROLE"], "roles/cli.go no longer reads JQ_ROLE?")
	return out
}

func TestComposeServices(t *testing.T) {
	t.Parallel()
	p := loadCompose(t)
	for _, want := range []string{"postgres", "redis", "kafka", "jq-server-1", "jq-server-2", "jq-worker", "jq-producer", "prometheus", "grafana"} {
		require.Contains(t, p.Services, want)
	}
	require.Equal(t, []string{"producer"}, p.Services["jq-producer"].Profiles)

	hostPorts := map[string]string{}
	for name, s := range p.Services {
		require.True(t, s.Image != "" || s.Build != nil, "service %s has neither image nor build", name)
		require.NotNil(t, s.HealthCheck, "service %s has no healthcheck", name)
		require.NotEmpty(t, s.HealthCheck.Test, "service %s has an empty healthcheck", name)
		for dep, d := range s.DependsOn {
			require.Equal(t, types.ServiceConditionHealthy, d.Condition, "%s waits for %s without service_healthy", name, dep)
		}
		for _, port := range s.Ports {
			require.NotEmpty(t, port.Published, "%s: port %d published on a random host port", name, port.Target)
			key := port.HostIP + ":" + port.Published + "/" + port.Protocol
			require.Empty(t, hostPorts[key], "host port %s used by %s and %s", key, hostPorts[key], name)
			hostPorts[key] = name
		}
	}

	// Kafka runs in KRaft mode: its own controller, no ZooKeeper anywhere.
	kafka := p.Services["kafka"]
	require.Equal(t, "broker,controller", *kafka.Environment["KAFKA_PROCESS_ROLES"])
	for name, s := range p.Services {
		require.NotContains(t, strings.ToLower(s.Image), "zookeeper", name)
	}
}

// jqServices are the services running the jq image, by role.
func jqServices(p *types.Project) map[string]string {
	out := map[string]string{}
	for name, s := range p.Services {
		if s.Build != nil {
			out[name] = *s.Environment["JQ_ROLE"]
		}
	}
	return out
}

func TestComposeJQServices(t *testing.T) {
	t.Parallel()
	p := loadCompose(t)
	known := map[string]bool{}
	for _, k := range config.Keys() {
		known[config.EnvVar(k)] = true
	}
	for k := range cliEnvVars(t) {
		known[k] = true
	}
	roles := jqServices(p)
	require.Equal(t, map[string]string{"jq-server-1": "server", "jq-server-2": "server", "jq-worker": "worker", "jq-producer": "producer"}, roles)
	secretFiles := map[string]string{}
	for name, s := range p.Secrets {
		secretFiles[name] = s.File
	}
	for name, role := range roles {
		s := p.Services[name]
		for k, v := range s.Environment {
			if strings.HasPrefix(k, "JQ_") {
				require.True(t, known[k], "%s sets %s, which names no configuration key (examples/config.yaml)", name, k)
				require.NotNil(t, v, "%s: %s has no value", name, k)
			}
		}
		require.Equal(t, "65532:65532", s.User, name)
		require.True(t, s.ReadOnly, "%s: root filesystem should be read-only", name)
		// Health and metrics listen on loopback by default: Prometheus and the host's port
		// mappings reach them over the compose network only when set.
		for _, v := range map[string][]string{"server": {"JQ_HEALTH_HOST", "JQ_METRICS_HOST"}, "worker": {"JQ_WORKER_BIND_HOST"}}[role] {
			h := s.Environment[v]
			require.NotNil(t, h, "%s: %s not set (its listener would be loopback only)", name, v)
			require.False(t, config.IsLoopback(*h), "%s: %s=%q", name, v, *h)
		}
		switch role {
		case "server":
			require.NotEmpty(t, *s.Environment["JQ_AUTH_TOKENS"], "%s: auth needs token hashes", name)
			// The web console, on its own published port per server (sessions are per server).
			require.Equal(t, "true", *s.Environment["JQ_UI_ENABLED"], name)
			require.True(t, slices.ContainsFunc(s.Ports, func(p types.ServicePortConfig) bool {
				return p.Target == 8088 && p.Published != ""
			}), "%s publishes the console's port 8088", name)
			require.NotContains(t, s.Environment, "JQ_AUTH_ENABLED", "%s: auth must stay on (auto)", name)
		default:
			// Clients present a token from a secret file.
			file := *s.Environment["JQ_TOKEN_FILE"]
			require.True(t, strings.HasPrefix(file, "/run/secrets/"), "%s: token file %s", name, file)
			secret := strings.TrimPrefix(file, "/run/secrets/")
			require.True(t, slices.ContainsFunc(s.Secrets, func(r types.ServiceSecretConfig) bool { return r.Source == secret }),
				"%s does not mount secret %s", name, secret)
			b, err := os.ReadFile(secretFiles[secret])
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(strings.TrimSpace(string(b)), "jq_"), "%s: %s holds no jq token", name, secret)
		}
	}
}

// TestPrometheusTargetsMatchCompose: every target in examples/grafana/prometheus.yml is a compose
// service on the metrics port its role listens on, and every jq service is scraped.
func TestPrometheusTargetsMatchCompose(t *testing.T) {
	t.Parallel()
	p := loadCompose(t)
	def := config.Default()
	metricsPort := map[string]int{"server": def.Metrics.Port, "worker": def.Worker.MetricsPort, "producer": def.Producer.MetricsPort}

	b, err := os.ReadFile(filepath.Join(repoRoot(t), "examples/grafana/prometheus.yml"))
	require.NoError(t, err)
	var prom struct {
		ScrapeConfigs []struct {
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	require.NoError(t, yaml.Unmarshal(b, &prom))
	scraped := map[string]bool{}
	roles := jqServices(p)
	for _, sc := range prom.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			for _, target := range st.Targets {
				host, port, err := net.SplitHostPort(target)
				require.NoError(t, err)
				role, ok := roles[host]
				require.True(t, ok, "prometheus.yml scrapes %s, which is not a jq service in compose.yaml", target)
				require.Equal(t, strconv.Itoa(metricsPort[role]), port, "%s: the %s metrics port", target, role)
				scraped[host] = true
			}
		}
	}
	for name := range roles {
		require.True(t, scraped[name], "prometheus.yml does not scrape %s", name)
	}
	mounted := slices.ContainsFunc(p.Services["prometheus"].Volumes, func(v types.ServiceVolumeConfig) bool {
		return strings.HasSuffix(v.Source, "examples/grafana/prometheus.yml") && v.Target == "/etc/prometheus/prometheus.yml"
	})
	require.True(t, mounted, "prometheus does not mount examples/grafana/prometheus.yml")
}
