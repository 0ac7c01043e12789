package api

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/jq-dev/jq/queue"
)

// ParsePriorityWeights reads priority weights as operators type them ("9=10,0=1"), shared by the
// admin CLI and the console: "" is none (strict priority). A priority listed twice is refused
// rather than the last one silently winning.
func ParsePriorityWeights(s string) (map[int32]int32, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[int32]int32{}
	for f := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(f), "=")
		p, err1 := strconv.ParseInt(strings.TrimSpace(k), 10, 32)
		w, err2 := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if !ok || err1 != nil || err2 != nil || p < queue.MinPriority || p > queue.MaxPriority || w < 1 {
			return nil, fmt.Errorf("%q: want priority=weight pairs such as 9=10,0=1 (priority %d-%d, weight ≥ 1)",
				s, queue.MinPriority, queue.MaxPriority)
		}
		if _, dup := out[int32(p)]; dup {
			return nil, fmt.Errorf("%q: priority %d is listed twice", s, p)
		}
		out[int32(p)] = int32(w)
	}
	return out, nil
}

// FormatPriorityWeights renders weights as ParsePriorityWeights reads them, highest priority
// first; "" when there are none.
func FormatPriorityWeights(m map[int32]int32) string {
	parts := make([]string, 0, len(m))
	for _, p := range slices.Backward(slices.Sorted(maps.Keys(m))) {
		parts = append(parts, fmt.Sprintf("%d=%d", p, m[p]))
	}
	return strings.Join(parts, ",")
}
