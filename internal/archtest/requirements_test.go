package archtest_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// A comment names what it relies on by an ID a reader can look up in the repository: a requirement
// (FR-012, NFR-015, "seed 001") in docs/requirements.md, an invariant (I3) in docs/architecture.md.
// Work-tracking references (an issue number, a numbered rule of a style list) resolve to nothing in
// the repository, so a comment that cites one says which ticket instead of why: every one is reported.

// referenceFiles are the files checked: code, SQL, scripts, configuration and the docs.
var referenceFiles = []string{".go", ".sql", ".lua", ".proto", ".sh", ".yaml", ".yml", ".awk", ".md"}

var (
	requirementRE = regexp.MustCompile(`\b(?:FR|NFR)-\d{3}\b|\bseed \d{3}\b`)
	invariantRE   = regexp.MustCompile(`\bI[1-9]\d?\b`)
	// trackingRE is a reference to an issue or a rule of a style list kept outside the repository,
	// also when a comment's line break falls inside it ("(issue\n// 22)").
	trackingRE = regexp.MustCompile(`(?i)\bissues?(?:\s|//|--|#)*#?\d+\b|\bissue-\d+\b|\bSTYLE(?:\s|//|--|#)+\d+\b`)
)

// definitions are the IDs the repository defines, read from its documents.
type definitions struct {
	requirements map[string]bool // "FR-012", "seed 001"
	invariants   map[string]bool // "I3"
}

func loadDefinitions(root string) (definitions, error) {
	d := definitions{requirements: map[string]bool{}, invariants: map[string]bool{}}
	req, err := os.ReadFile(filepath.Join(root, "docs", "requirements.md"))
	if err != nil {
		return d, err
	}
	for _, m := range regexp.MustCompile(`(?m)^- \*\*((?:FR|NFR)-\d{3}|seed \d{3})\*\*`).FindAllStringSubmatch(string(req), -1) {
		d.requirements[m[1]] = true
	}
	arch, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		return d, err
	}
	for _, m := range regexp.MustCompile(`(?m)^- \*\*(I[1-9]\d?)\*\*`).FindAllStringSubmatch(string(arch), -1) {
		d.invariants[m[1]] = true
	}
	return d, nil
}

func readDefinitions(t *testing.T, root string) definitions {
	t.Helper()
	d, err := loadDefinitions(root)
	require.NoError(t, err)
	require.NotEmpty(t, d.requirements, "docs/requirements.md defines no requirement")
	require.NotEmpty(t, d.invariants, "docs/architecture.md defines no invariant")
	return d
}

// Cheap tests of a line that a regular expression could match: the expressions run only on the
// few lines that pass (over the whole tree they take minutes under -race on a busy machine).
func mayCiteRequirement(line string) bool {
	return strings.Contains(line, "FR-") || strings.Contains(line, "seed ")
}

func mayCiteInvariant(line string) bool {
	for i := strings.IndexByte(line, 'I'); i >= 0 && i+1 < len(line); {
		if c := line[i+1]; c >= '1' && c <= '9' {
			return true
		}
		j := strings.IndexByte(line[i+1:], 'I')
		if j < 0 {
			return false
		}
		i += 1 + j
	}
	return false
}

func mayCiteTracking(line string) bool {
	return strings.Contains(line, "issue") || strings.Contains(line, "Issue") ||
		strings.Contains(line, "ISSUE") || strings.Contains(line, "STYLE")
}

// references returns the matches of re that start in a line of src that may hold one; a match may
// run on into the next line.
func references(re *regexp.Regexp, may func(string) bool, src string) []string {
	var out []string
	for len(src) > 0 {
		line, rest := src, ""
		if i := strings.IndexByte(src, '\n'); i >= 0 {
			line, rest = src[:i+1], src[i+1:]
		}
		if may(line) {
			next := rest
			if i := strings.IndexByte(rest, '\n'); i >= 0 {
				next = rest[:i+1]
			}
			window := line + next
			for _, m := range re.FindAllStringIndex(window, -1) {
				if m[0] < len(line) {
					out = append(out, strings.Join(strings.Fields(window[m[0]:m[1]]), " "))
				}
			}
		}
		src = rest
	}
	return out
}

// unresolved returns one line per reference in src that the repository does not define.
func (d definitions) unresolved(rel, src string) []string {
	var out []string
	for _, m := range references(requirementRE, mayCiteRequirement, src) {
		if !d.requirements[m] {
			out = append(out, rel+" cites "+m+", which docs/requirements.md does not define")
		}
	}
	for _, m := range references(invariantRE, mayCiteInvariant, src) {
		if !d.invariants[m] {
			out = append(out, rel+" cites invariant "+m+", which docs/architecture.md does not define")
		}
	}
	for _, m := range references(trackingRE, mayCiteTracking, src) {
		out = append(out, rel+" cites "+m+": say why instead (the tracker is not in the repository)")
	}
	return out
}

// referenceSources reads the checked files of the tree at root once (path relative to root →
// source); the mutation tests reuse them.
var referenceSources = sync.OnceValues(func() (map[string]string, error) {
	root, err := filepath.Abs("../..")
	if err != nil {
		return nil, err
	}
	srcs := map[string]string{}
	err = filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := e.Name()
		if e.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if name != "Taskfile.yml" && name != "Dockerfile" && !slices.Contains(referenceFiles, filepath.Ext(name)) {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		src, err := os.ReadFile(path)
		srcs[rel] = string(src)
		return err
	})
	return srcs, err
})

// fileResult is what the check found in one file.
type fileResult struct {
	bad   []string
	cited int
}

func (d definitions) check(rel, src string) fileResult {
	return fileResult{
		bad:   d.unresolved(rel, src),
		cited: len(references(requirementRE, mayCiteRequirement, src)) + len(references(invariantRE, mayCiteInvariant, src)),
	}
}

// treeResults is the check of every file of the tree, done once: the mutation tests replace or add
// one file and reuse the rest (the regular expressions over the whole tree take seconds under -race).
var treeResults = sync.OnceValues(func() (map[string]fileResult, error) {
	root, err := filepath.Abs("../..")
	if err != nil {
		return nil, err
	}
	d, err := loadDefinitions(root)
	if err != nil {
		return nil, err
	}
	srcs, err := referenceSources()
	if err != nil {
		return nil, err
	}
	out := make(map[string]fileResult, len(srcs))
	for rel, src := range srcs {
		out[rel] = d.check(rel, src)
	}
	return out, nil
})

// checkReferences checks the tree with overlay (path relative to root → source) added to or
// replacing its files, and returns the unresolved references and how many resolved.
func checkReferences(t *testing.T, d definitions, overlay map[string]string) (bad []string, cited int) {
	t.Helper()
	results, err := treeResults()
	require.NoError(t, err)
	for rel, r := range results {
		if _, ok := overlay[rel]; !ok {
			bad, cited = append(bad, r.bad...), cited+r.cited
		}
	}
	for rel, src := range overlay {
		r := d.check(rel, src)
		bad, cited = append(bad, r.bad...), cited+r.cited
	}
	slices.Sort(bad)
	return bad, cited
}

// TestReferencesResolve: every ID a code, configuration or documentation file cites is defined in
// the repository, and none cites an issue or a style rule by number.
func TestReferencesResolve(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	bad, cited := checkReferences(t, readDefinitions(t, root), nil)
	for _, b := range bad {
		t.Error(b)
	}
	require.NotZero(t, cited)
}

// TestReferencesCanFail adds one file per kind of unresolved reference to the real tree (through
// the overlay, the tree itself untouched) and requires each to be reported, and the resolving ones
// beside them not.
func TestReferencesCanFail(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	d := readDefinitions(t, root)
	// The references are assembled here so that this file does not cite them itself.
	issue, style := "iss"+"ue", "STY"+"LE"
	for _, tc := range []struct{ file, ref string }{
		{"queue/mutant.go", "FR" + "-999"},
		{"store/mutant.go", "NFR" + "-099"},
		{"api/mutant.go", "seed" + " 099"},
		{"queue/engine/mutant.go", "I" + "99"},
		{"queue/engine/mutant_test.go", issue + " 21"},
		{"roles/mutant.go", "I" + issue[1:] + " 7"},
		{"migrations/postgres/mutant.sql", issue + " #4"},
		{"Taskfile.yml", style + " 21"},
		{"store/redis/mutant.lua", issue + "-21"},
		{"docs/mutant.md", "I" + "12"},
		{"api/server/mutant.go", issue + "\n// 22"}, // a comment's line break inside the reference
	} {
		t.Run(tc.ref, func(t *testing.T) {
			t.Parallel()
			src := "// Held by FR-012, seed 001 and I3, which resolve; and by " + tc.ref + ", which does not.\n"
			if strings.HasSuffix(tc.file, ".sql") || strings.HasSuffix(tc.file, ".lua") {
				src = "-- " + src[3:]
			}
			if tc.file == "Taskfile.yml" {
				orig, err := os.ReadFile(filepath.Join(root, tc.file))
				require.NoError(t, err)
				src = string(orig) + "# " + src[3:]
			}
			bad, _ := checkReferences(t, d, map[string]string{tc.file: src})
			require.Len(t, bad, 1, "exactly the mutant's reference: %v", bad)
			require.Contains(t, bad[0], tc.file)
			require.Contains(t, bad[0], strings.Join(strings.Fields(tc.ref), " "))
		})
	}
}
