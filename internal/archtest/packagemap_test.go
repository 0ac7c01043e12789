package archtest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The package map of docs/architecture.md is where a newcomer looks up which package to change; it
// is only useful while it names every package of the module, and only those.

var mapRow = regexp.MustCompile("(?m)^\\| `([^`]+)` \\|")

// mappedPackages returns the packages the "## Package map" section of doc lists, relative to the
// module root ("." for the root).
func mappedPackages(t *testing.T, doc string) []string {
	t.Helper()
	_, section, ok := strings.Cut(doc, "\n## Package map\n")
	require.True(t, ok, "docs/architecture.md has no \"## Package map\" section")
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var out []string
	for _, m := range mapRow.FindAllStringSubmatch(section, -1) {
		out = append(out, m[1])
	}
	return out
}

// modulePackages lists the packages of the module, relative to its root.
func modulePackages(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err)
	mod := exec.Command("go", "list", "-m")
	mod.Dir = root
	modPath, err := mod.Output()
	require.NoError(t, err)
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p, strings.TrimSpace(string(modPath))), "/")
		if rel == "" {
			rel = "."
		}
		pkgs = append(pkgs, rel)
	}
	return pkgs
}

// mapProblems returns one line per package missing from the map and per row naming no package.
func mapProblems(mapped, pkgs []string) []string {
	var out []string
	for _, p := range pkgs {
		if !slices.Contains(mapped, p) {
			out = append(out, "package "+p+" is missing from the package map of docs/architecture.md")
		}
	}
	for _, m := range mapped {
		if !slices.Contains(pkgs, m) {
			out = append(out, "the package map of docs/architecture.md names "+m+", which is not a package of the module")
		}
	}
	return out
}

// TestPackageMapIsComplete: docs/architecture.md's package map names every package of the module,
// and nothing else; a removed row and a stale one are both reported (the second half of the test).
func TestPackageMapIsComplete(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	require.NoError(t, err)
	mapped := mappedPackages(t, string(doc))
	pkgs := modulePackages(t, root)
	require.NotEmpty(t, pkgs)
	require.Empty(t, mapProblems(mapped, pkgs))

	// The check can fail: the map without the row of queue/engine, and with a row of a package
	// that does not exist.
	mutated := regexp.MustCompile("(?m)^\\| `queue/engine` \\|.*\n").ReplaceAllString(string(doc), "")
	mutated = strings.Replace(mutated, "| `queue` |", "| `queue/gone` | moved |\n| `queue` |", 1)
	require.Equal(t, []string{
		"package queue/engine is missing from the package map of docs/architecture.md",
		"the package map of docs/architecture.md names queue/gone, which is not a package of the module",
	}, mapProblems(mappedPackages(t, mutated), pkgs))
}
