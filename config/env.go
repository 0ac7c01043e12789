package config

import (
	"maps"
	"slices"
	"strings"

	"github.com/jq-dev/jq/internal/typo"
)

// UnknownEnv lists, one warning each, the JQ_ variables in environ that name neither a
// configuration key nor one of also (variables read elsewhere, such as JQ_ROLE), with the closest
// known name when it looks like a typo: an unknown JQ_ variable is otherwise ignored in silence.
// JQ_TEST_ variables belong to the test suite and are skipped.
func UnknownEnv(environ []string, also []string) []string {
	known := make(map[string]bool, len(keys.byEnv)+len(also))
	for name := range keys.byEnv {
		known[name] = true
	}
	for _, name := range also {
		known[name] = true
	}
	names := slices.Sorted(maps.Keys(known)) // a stable suggestion among equally close names
	var warnings []string
	seen := map[string]bool{}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix) || strings.HasPrefix(name, envPrefix+"TEST_") || known[name] || seen[name] {
			continue
		}
		seen[name] = true
		w := name + " is not a jq setting; ignored"
		best, bestD := "", 4
		for _, k := range names {
			if d := typo.Distance(name, k, bestD); d < bestD {
				best, bestD = k, d
			}
		}
		if best != "" {
			w = name + " is not a jq setting (did you mean " + best + "?); ignored"
		}
		warnings = append(warnings, w)
	}
	return warnings
}
