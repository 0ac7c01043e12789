// Package buildinfo reports the version and commit the jq binary was built from.
//
// `task build` stamps Version and Commit with -ldflags; a plain `go build` or
// `go install` falls back to the module version and the VCS data that
// runtime/debug records.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Set at link time: -ldflags "-X github.com/jq-dev/jq/internal/buildinfo.Version=v0.1.0 ...".
var (
	Version   = ""
	Commit    = ""
	BuildTime = ""
)

// Info is the build identity of this binary.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	BuildTime string `json:"build_time,omitempty"`
	GoVersion string `json:"go_version"`
}

// DefaultVersion is reported when neither -ldflags nor the module system
// supplies a version (a build from a source checkout).
const DefaultVersion = "v0.1.0-dev"

// Get returns the build identity, preferring link-time values.
func Get() Info {
	info := Info{Version: Version, Commit: Commit, BuildTime: BuildTime, GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
		if info.Commit == "" {
			info.Commit, info.BuildTime = fromVCS(bi.Settings, info.BuildTime)
		}
	}
	if info.Version == "" {
		info.Version = DefaultVersion
	}
	if info.Commit == "" {
		info.Commit = "unknown"
	}
	return info
}

func fromVCS(settings []debug.BuildSetting, buildTime string) (commit, when string) {
	dirty := false
	when = buildTime
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.time":
			if when == "" {
				when = s.Value
			}
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if commit != "" && dirty {
		commit += "-dirty"
	}
	return commit, when
}

// String is the one-line form printed by `jq --version`.
func (i Info) String() string {
	s := "jq " + i.Version + " (commit " + i.Commit
	if i.BuildTime != "" {
		s += ", built " + i.BuildTime
	}
	return s + ", " + i.GoVersion + ")"
}
