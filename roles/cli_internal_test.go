package roles

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Every top-level command of the admin grammar implies --role=admin when no role is given (a
// hand-kept list once left `jq schedule list` "unknown command").
func TestEveryOperatorCommandImpliesAdmin(t *testing.T) {
	t.Parallel()
	none := func(string) string { return "" }
	cmds := operatorCommands()
	require.NotEmpty(t, cmds)
	for _, c := range cmds {
		role, err := roleFromArgs([]string{c.name, "list"}, none)
		require.NoError(t, err)
		require.Equal(t, Admin, role, "jq %s …", c.name)
	}
	role, err := roleFromArgs([]string{"schedule", "list"}, none)
	require.NoError(t, err)
	require.Equal(t, Admin, role)
	role, err = roleFromArgs([]string{"--config", "x.yaml"}, none)
	require.NoError(t, err)
	require.Equal(t, All, role, "no command: all")
}

// A role flag's value is not the command line's first argument: `jq --role=all --scan-dir ./data`
// (docs/producer.md) is not a filter for the JSON processor.
func TestFlagValuesAreNotTheFirstArgument(t *testing.T) {
	t.Parallel()
	require.Empty(t, firstArg([]string{"--role=all", "--scan-dir", "./data"}))
	require.Empty(t, firstArg([]string{"--role=worker", "--concurrency", "8", "--queues", "default"}))
	require.Equal(t, ".", firstArg([]string{"--config", "x.yaml", "."}))
}
