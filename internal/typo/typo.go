// Package typo measures how far a mistyped word is from a known one, for the did-you-mean hints of
// the command line and the configuration (unknown commands, roles, keys and JQ_ variables).
package typo

// Distance is the optimal-string-alignment distance of a and b: insertions, deletions,
// substitutions and transpositions of adjacent bytes, each costing 1 ("wroker" is 1 from
// "worker"). It stops counting at limit: a result of limit or more means "at least limit", which
// keeps a search among many candidates cheap. limit <= 0 means no limit.
func Distance(a, b string, limit int) int {
	if limit > 0 && abs(len(a)-len(b)) >= limit {
		return limit
	}
	// Three rows: the one before the previous is what a transposition reaches back to.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
			rowMin = min(rowMin, cur[j])
		}
		if limit > 0 && rowMin >= limit {
			return limit
		}
		prev2, prev, cur = prev, cur, prev2
	}
	if limit > 0 {
		return min(prev[len(b)], limit)
	}
	return prev[len(b)]
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
