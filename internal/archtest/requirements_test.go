package archtest_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRequirementIDsResolve: a comment that names a requirement by its ID (FR-012, NFR-015) names
// one that docs/requirements.md defines, so a reader of the code can look it up in the repository.
func TestRequirementIDsResolve(t *testing.T) {
	root := repoRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "requirements.md"))
	require.NoError(t, err)
	defined := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^- \*\*((?:FR|NFR)-\d{3})\*\*`).FindAllStringSubmatch(string(doc), -1) {
		defined[m[1]] = true
	}
	require.NotEmpty(t, defined, "docs/requirements.md defines no requirement")
	id := regexp.MustCompile(`\b(?:FR|NFR)-\d{3}\b`)
	cited := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range id.FindAllString(string(src), -1) {
			cited++
			if !defined[m] {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s cites %s, which docs/requirements.md does not define", rel, m)
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.NotZero(t, cited)
}
