package config_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/config"
)

// FuzzLoad feeds arbitrary bytes to Load as a config file: it must never
// panic, and a success must be a valid config.
func FuzzLoad(f *testing.F) {
	example, err := os.ReadFile("../examples/config.yaml")
	require.NoError(f, err)
	f.Add(example)
	f.Add([]byte(""))
	f.Add([]byte("grpc:\n  port: abc\n"))
	f.Add([]byte("worker:\n  queues: [a, {b: c}]\n"))
	f.Add([]byte("a: &x [*x]\n"))
	f.Add([]byte("? [a]\n: b\n"))

	f.Fuzz(func(t *testing.T, data []byte) {
		path := writeConfig(t, string(data))
		cfg, _, err := config.Load(config.LoadOptions{File: path})
		if err != nil {
			require.Nil(t, cfg)
			return
		}
		require.NoError(t, cfg.Validate())
		r := cfg.Redacted()
		_, err = r.YAML()
		require.NoError(t, err)
	})
}
