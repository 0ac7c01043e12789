package buildinfo

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGetFromVCSStamps(t *testing.T) {
	bi := &debug.BuildInfo{
		Main: debug.Module{Path: "github.com/jq-dev/jq", Version: "v0.3.0"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123abcd"},
			{Key: "vcs.time", Value: "2026-11-29T00:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	info := get(bi)
	require.Equal(t, "v0.3.0", info.Version)
	require.Equal(t, "0123abcd-dirty", info.Commit)
	require.Equal(t, "2026-11-29T00:00:00Z", info.BuildTime)
	require.Contains(t, info.String(), "jq v0.3.0 (commit 0123abcd-dirty of 2026-11-29T00:00:00Z, go")
}

func TestGetWithoutVCS(t *testing.T) {
	info := get(&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}})
	require.Equal(t, DefaultVersion, info.Version)
	require.Equal(t, "unknown", info.Commit)
	require.Empty(t, info.BuildTime)
}
