package deploytest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/jq-dev/jq/config"
)

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helmBinary is the Helm CLI pinned in tools/go.mod, built once for the test binary: `go tool -n`
// builds it into the build cache (or finds it there) and prints its path. The tests run helm in
// parallel, and each `go tool … helm` of their own both loaded helm's whole build graph (10 s of
// the go command at load 25) and, on an empty build cache, compiled and linked helm beside the
// others.
func helmBinary(t *testing.T, root string) string {
	t.Helper()
	helmOnce.Do(func() {
		cmd := exec.Command("go", "tool", "-modfile=tools/go.mod", "-n", "helm")
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			helmErr = fmt.Errorf("go tool -n helm: %w: %s", err, stderr.String())
			return
		}
		helmPath = strings.TrimSpace(string(out))
	})
	require.NoError(t, helmErr)
	return helmPath
}

// helm runs the Helm CLI pinned in tools/go.mod (go tool -modfile=tools/go.mod helm …).
func helm(t *testing.T, args ...string) []byte {
	t.Helper()
	root := repoRoot(t)
	cmd := exec.Command(helmBinary(t, root), args...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "helm %v: %s%s", args, out, stderr.String())
	return out
}

// allOn turns on every optional part, so lint and the assertions see every template.
var allOn = []string{"--set", "producer.enabled=true", "--set", "worker.keda.enabled=true", "--set", "podMonitor.enabled=true"}

type object = map[string]any

func render(t *testing.T) map[string][]object {
	t.Helper()
	out := helm(t, append([]string{"template", "t", "deploy/helm/jq"}, allOn...)...)
	byKind := map[string][]object{}
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var o object
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if o == nil {
			continue
		}
		byKind[o["kind"].(string)] = append(byKind[o["kind"].(string)], o)
	}
	return byKind
}

// get walks a path of map keys and list indexes.
func get(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(object)
			require.True(t, ok, "at %q: not a map: %v", k, v)
			v = m[k]
		case int:
			l, ok := v.([]any)
			require.True(t, ok && len(l) > k, "at [%d]: not a long enough list: %v", k, v)
			v = l[k]
		}
	}
	return v
}

func TestHelmLint(t *testing.T) {
	t.Parallel()
	helm(t, append([]string{"lint", "--strict", filepath.Join("deploy", "helm", "jq")}, allOn...)...)
	helm(t, "lint", "--strict", filepath.Join("deploy", "helm", "jq"))
}

func TestHelmManifests(t *testing.T) {
	t.Parallel()
	objs := render(t)
	def := config.Default()
	bound := map[string]int{"server": def.Server.ShutdownGraceS, "worker": def.Worker.ShutdownGraceS, "producer": 0}
	known := map[string]bool{}
	for _, k := range config.Keys() {
		known[config.EnvVar(k)] = true
	}
	for k := range cliEnvVars(t) {
		known[k] = true
	}

	offPod := map[string][]string{"server": {"JQ_HEALTH_HOST", "JQ_METRICS_HOST"}, "worker": {"JQ_WORKER_BIND_HOST"}}
	deployments := map[string]object{}
	for _, d := range objs["Deployment"] {
		component := get(t, d, "metadata", "labels", "app.kubernetes.io/component").(string)
		deployments[component] = d
	}
	require.Len(t, deployments, 3, "server, worker and producer Deployments")
	require.EqualValues(t, 2, get(t, deployments["server"], "spec", "replicas"))

	for component, d := range deployments {
		pod := get(t, d, "spec", "template", "spec")
		require.Equal(t, true, get(t, pod, "securityContext", "runAsNonRoot"), component)
		require.NotZero(t, get(t, pod, "securityContext", "runAsUser"), component)
		grace := get(t, pod, "terminationGracePeriodSeconds").(int)
		require.Greater(t, grace, bound[component], "%s: grace period must exceed jq's own shutdown bound", component)

		c := get(t, pod, "containers", 0)
		sc := get(t, c, "securityContext")
		require.Equal(t, true, get(t, sc, "readOnlyRootFilesystem"), component)
		require.Equal(t, false, get(t, sc, "allowPrivilegeEscalation"), component)
		require.Equal(t, []any{"ALL"}, get(t, sc, "capabilities", "drop"), component)
		for _, kind := range []string{"requests", "limits"} {
			for _, r := range []string{"cpu", "memory"} {
				require.NotNil(t, get(t, c, "resources", kind, r), "%s: resources.%s.%s", component, kind, r)
			}
		}
		require.NotNil(t, get(t, c, "readinessProbe", "httpGet"), component)
		require.NotNil(t, get(t, c, "livenessProbe", "httpGet"), component)
		// Every JQ_ variable the chart sets names a configuration key (or a flag's variable), as
		// compose.yaml's do (TestComposeJQServices).
		env, _ := get(t, c, "env").([]any)
		require.NotEmpty(t, env, component)
		values := map[string]string{}
		for _, e := range env {
			name, _ := get(t, e, "name").(string)
			if strings.HasPrefix(name, "JQ_") {
				require.True(t, known[name], "%s sets %s, which names no configuration key (examples/config.yaml)", component, name)
			}
			values[name], _ = e.(object)["value"].(string)
		}
		// Health and metrics listen on loopback by default: the probes and the PodMonitor reach
		// them on the pod's address only when the chart says so.
		for _, v := range offPod[component] {
			h, ok := values[v]
			require.True(t, ok, "%s: %s not set (its listener would be loopback only)", component, v)
			require.False(t, config.IsLoopback(h), "%s: %s=%q", component, v, h)
		}
	}

	server := get(t, deployments["server"], "spec", "template", "spec", "containers", 0)
	require.Equal(t, "/readyz", get(t, server, "readinessProbe", "httpGet", "path"))
	require.Equal(t, "/healthz", get(t, server, "livenessProbe", "httpGet", "path"))
	require.Positive(t, get(t, server, "lifecycle", "preStop", "sleep", "seconds"))
	worker := get(t, deployments["worker"], "spec", "template", "spec", "containers", 0)
	require.Equal(t, "/readyz", get(t, worker, "readinessProbe", "httpGet", "path"))

	require.Len(t, objs["PodDisruptionBudget"], 1)
	require.EqualValues(t, 1, get(t, objs["PodDisruptionBudget"][0], "spec", "minAvailable"))
	// The web console: its port on the server, its env, and a Service of its own that keeps each
	// client on one replica (sessions are per replica).
	var ports []string
	for _, p := range get(t, server, "ports").([]any) {
		ports = append(ports, fmt.Sprint(get(t, p, "name"), ":", get(t, p, "containerPort")))
	}
	require.Contains(t, ports, "ui:8088")
	serverEnv := map[string]any{}
	for _, e := range get(t, server, "env").([]any) {
		serverEnv[get(t, e, "name").(string)] = get(t, e, "value")
	}
	require.Equal(t, "true", serverEnv["JQ_UI_ENABLED"])
	require.Equal(t, "8088", serverEnv["JQ_UI_PORT"])
	require.Len(t, objs["Service"], 2, "the server's and the console's")
	var console object
	for _, svc := range objs["Service"] {
		if strings.HasSuffix(get(t, svc, "metadata", "name").(string), "-console") {
			console = svc
		}
	}
	require.NotNil(t, console)
	require.Equal(t, "ClientIP", get(t, console, "spec", "sessionAffinity"))
	require.Equal(t, "ui", get(t, console, "spec", "ports", 0, "targetPort"))
	require.EqualValues(t, 8088, get(t, console, "spec", "ports", 0, "port"))
	var uiAllowed bool
	for _, rule := range get(t, objs["NetworkPolicy"][0], "spec", "ingress").([]any) {
		for _, p := range get(t, rule, "ports").([]any) {
			if get(t, p, "port") == 8088 {
				uiAllowed = true
			}
		}
	}
	require.True(t, uiAllowed, "the server's network policy admits the console's port")
	require.Len(t, objs["Secret"], 1)
	require.Len(t, objs["NetworkPolicy"], 2)
	require.Len(t, objs["ScaledObject"], 1)
	require.Len(t, objs["PodMonitor"], 1)
}

// healthSources returns, per NetworkPolicy, the "from" of each rule that admits a health port
// (8080 on servers, 8081 on workers and the producer); a rule without "from" admits everyone.
func healthSources(t *testing.T, out []byte) map[string][]any {
	t.Helper()
	got := map[string][]any{}
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var o object
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if o == nil || o["kind"] != "NetworkPolicy" {
			continue
		}
		name := get(t, o, "metadata", "name").(string)
		got[name] = nil
		for _, rule := range get(t, o, "spec", "ingress").([]any) {
			for _, p := range get(t, rule, "ports").([]any) {
				if port := get(t, p, "port"); port == 8080 || port == 8081 {
					from, ok := rule.(object)["from"]
					require.True(t, ok, "%s admits the health port from everywhere", name)
					got[name] = append(got[name], from)
				}
			}
		}
	}
	require.Len(t, got, 2)
	return got
}

// TestHelmHealthPortRestricted: no pod may reach a health port (it could hold the connections
// and starve the kubelet's probes); networkPolicy.healthFrom admits the nodes' range where the
// CNI filters the kubelet's traffic.
func TestHelmHealthPortRestricted(t *testing.T) {
	t.Parallel()
	for name, from := range healthSources(t, helm(t, append([]string{"template", "t", "deploy/helm/jq"}, allOn...)...)) {
		require.Empty(t, from, "%s: the health port admits %v", name, from)
	}
	out := helm(t, append([]string{"template", "t", "deploy/helm/jq", "--set", "networkPolicy.healthFrom[0].ipBlock.cidr=10.1.0.0/16"}, allOn...)...)
	for name, from := range healthSources(t, out) {
		require.Len(t, from, 1, name)
		require.Equal(t, "10.1.0.0/16", get(t, from[0], 0, "ipBlock", "cidr"), name)
	}
}

// TestHelmExistingSecret: naming an existing Secret creates none and points every reference at it.
func TestHelmExistingSecret(t *testing.T) {
	t.Parallel()
	out := helm(t, "template", "t", "deploy/helm/jq", "--set", "secrets.existingSecret=ops-jq")
	require.NotContains(t, string(out), "kind: Secret")
	require.Contains(t, string(out), "secretName: ops-jq")
	require.Contains(t, string(out), "name: ops-jq")
}
