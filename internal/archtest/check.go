package archtest

import (
	"fmt"
	"slices"
	"strings"
)

// Package is one package as `go list -deps` describes it, with the imports of its non-test files.
type Package struct {
	ImportPath string
	Standard   bool
	Imports    []string
	// Files maps each non-test file (module-relative path) to its imports; Check needs them only
	// for package roles, where the rule is per file.
	Files map[string][]string
}

// Sealed are the packages whose whole dependency closure stays clear of Backends and Drivers: the
// domain, the store interfaces, queue's parts, the API and the Go client of applications.
var Sealed = []string{"queue", "queue/...", "store", "api/...", "client"}

// Check returns one line per violation of table by pkgs (every package of the module and all its
// dependencies): an import no row allows, a package of the module without a row or with two, a
// row that matches no package (unless Planned), a file of package roles other than WireFile that
// imports a backend or a driver, and a Sealed package that depends on a backend or a driver.
func Check(table []Row, pkgs []Package) []string {
	byPath := map[string]*Package{}
	for i := range pkgs {
		byPath[pkgs[i].ImportPath] = &pkgs[i]
	}
	var out []string
	used := make([]bool, len(table))
	for _, p := range pkgs {
		rel, ok := relPath(p.ImportPath)
		if !ok {
			continue
		}
		var rows []int
		for i, r := range table {
			if matchAny(r.Pkgs, rel) {
				rows = append(rows, i)
				used[i] = true
			}
		}
		switch len(rows) {
		case 0:
			out = append(out, fmt.Sprintf("%s has no row in the import table (internal/archtest/table.go): put it in its layer", rel))
			continue
		case 1:
		default:
			out = append(out, fmt.Sprintf("%s matches %d rows of the import table; it must match one", rel, len(rows)))
			continue
		}
		r := table[rows[0]]
		for _, imp := range p.Imports {
			if why := forbidden(r, imp, byPath); why != "" {
				out = append(out, fmt.Sprintf("%s imports %s: %s", rel, imp, why))
			}
		}
		if rel == "roles" {
			out = append(out, wireOnly(p.Files)...)
		}
		if matchAny(Sealed, rel) {
			if chain := backendChain(p.ImportPath, byPath); chain != nil {
				out = append(out, fmt.Sprintf("%s depends on a backend: %s", rel, strings.Join(chain, " → ")))
			}
		}
	}
	for i, r := range table {
		if !used[i] && !r.Planned {
			out = append(out, fmt.Sprintf("the import table's row %v matches no package: remove or fix it", r.Pkgs))
		}
	}
	slices.Sort(out)
	return out
}

// forbidden says why row r may not import imp, or "" when it may.
func forbidden(r Row, imp string, byPath map[string]*Package) string {
	if rel, ok := relPath(imp); ok {
		if matchAny(r.May, rel) {
			return ""
		}
		return "not in its row of the import table"
	}
	if p := byPath[imp]; p != nil && p.Standard {
		return ""
	}
	if hasPrefix(Drivers, imp) {
		if hasPrefix(r.Drivers, imp) {
			return ""
		}
		return "a driver, which only the backends and roles/wire.go use"
	}
	if r.Third == nil || hasPrefix(r.Third, imp) {
		return ""
	}
	if len(r.Third) == 0 {
		return "this layer uses the standard library only"
	}
	return "a third-party module this layer does not use"
}

// wireOnly lists the files of package roles, other than WireFile, that import a backend or driver.
func wireOnly(files map[string][]string) []string {
	var out []string
	for file, imps := range files {
		if file == WireFile {
			continue
		}
		for _, imp := range imps {
			if isBackend(imp) {
				out = append(out, fmt.Sprintf("%s imports %s: in package roles only %s names a backend", file, imp, WireFile))
			}
		}
	}
	return out
}

// backendChain returns a path of imports from pkg to a backend or driver, or nil.
func backendChain(pkg string, byPath map[string]*Package) []string {
	seen := map[string]bool{}
	var walk func(p string) []string
	walk = func(p string) []string {
		if isBackend(p) {
			return []string{p}
		}
		if seen[p] {
			return nil
		}
		seen[p] = true
		if q := byPath[p]; q != nil {
			for _, imp := range q.Imports {
				if c := walk(imp); c != nil {
					return append([]string{p}, c...)
				}
			}
		}
		return nil
	}
	return walk(pkg)
}

func isBackend(imp string) bool {
	if rel, ok := relPath(imp); ok {
		return matchAny(Backends, rel)
	}
	return hasPrefix(Drivers, imp)
}

// relPath is imp relative to the module ("." for the module's root package).
func relPath(imp string) (string, bool) {
	if imp == Module {
		return ".", true
	}
	rel, ok := strings.CutPrefix(imp, Module+"/")
	return rel, ok
}

// matchAny reports whether rel is one of patterns, where "x/..." stands for x and everything below.
func matchAny(patterns []string, rel string) bool {
	for _, p := range patterns {
		if base, ok := strings.CutSuffix(p, "/..."); ok {
			if rel == base || strings.HasPrefix(rel, base+"/") {
				return true
			}
		} else if rel == p {
			return true
		}
	}
	return false
}

// hasPrefix reports whether imp is one of the module paths in prefixes or below one.
func hasPrefix(prefixes []string, imp string) bool {
	for _, p := range prefixes {
		if imp == p || strings.HasPrefix(imp, p+"/") {
			return true
		}
	}
	return false
}
