// Package buildinfo reports the version and commit the jq binary was built from.
//
// A plain `go build` in a git checkout stamps both (runtime/debug's VCS settings: the commit, its
// time, whether the tree was modified; the main module's version from a git tag, or a
// pseudo-version). Nothing changes between two builds of the same tree, so a rebuild with nothing
// changed is a cache hit. A build without VCS data (a source archive, `-buildvcs=false`) may set
// Version and Commit with -ldflags -X, as the Dockerfile does.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Set at link time only where no VCS data is available:
// -ldflags "-X github.com/jq-dev/jq/internal/buildinfo.Version=v0.1.0 -X …Commit=<sha>".
var (
	Version = ""
	Commit  = ""
)

// Info is the build identity of this binary.
type Info struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	// BuildTime is the commit's time (vcs.time), not the time of the build: the same tree
	// builds the same binary.
	BuildTime string `json:"build_time,omitempty"`
	GoVersion string `json:"go_version"`
}

// DefaultVersion is reported when neither -ldflags nor the module system
// supplies a version (a build without VCS data).
const DefaultVersion = "v0.1.0-dev"

// Get returns the build identity, preferring link-time values.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return get(bi)
}

func get(bi *debug.BuildInfo) Info {
	info := Info{Version: Version, Commit: Commit, GoVersion: runtime.Version()}
	if bi != nil {
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
		commit, when := fromVCS(bi.Settings)
		if info.Commit == "" {
			info.Commit = commit
		}
		info.BuildTime = when
	}
	if info.Version == "" {
		info.Version = DefaultVersion
	}
	if info.Commit == "" {
		info.Commit = "unknown"
	}
	return info
}

func fromVCS(settings []debug.BuildSetting) (commit, when string) {
	dirty := false
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.time":
			when = s.Value
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
		s += " of " + i.BuildTime
	}
	return s + ", " + i.GoVersion + ")"
}
