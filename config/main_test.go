package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.yaml.in/yaml/v3"

	"github.com/jq-dev/jq/config"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// writeConfig writes a YAML config file into a fresh temp dir.
func writeConfig(t testing.TB, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// load runs config.Load and requires success.
func load(t *testing.T, opts config.LoadOptions) (*config.Config, []string) {
	t.Helper()
	cfg, warnings, err := config.Load(opts)
	require.NoError(t, err)
	require.NotNil(t, cfg)
	return cfg, warnings
}

// loadErr runs config.Load and requires a validation failure.
func loadErr(t *testing.T, opts config.LoadOptions) error {
	t.Helper()
	cfg, _, err := config.Load(opts)
	require.Error(t, err)
	require.ErrorIs(t, err, config.ErrInvalid)
	require.Nil(t, cfg)
	return err
}

// readKeys returns the leaf key paths present in a YAML file.
func readKeys(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, yaml.Unmarshal(b, &m))
	var out []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok {
				walk(prefix+k+".", sub)
				continue
			}
			out = append(out, prefix+k)
		}
	}
	walk("", m)
	return out
}
