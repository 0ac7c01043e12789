package typo

import "testing"

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b  string
		limit int
		want  int
	}{
		{"worker", "worker", 0, 0},
		{"wroker", "worker", 0, 1}, // a transposition is one edit
		{"stauts", "status", 0, 1},
		{"que", "queue", 0, 2},
		{"kitten", "sitting", 0, 3},
		{"", "abc", 0, 3},
		{"abc", "", 0, 3},
		{"ca", "abc", 0, 3}, // optimal string alignment: no edit of a transposed pair
		{"JQ_WORKER_CONCURENCY", "JQ_WORKER_CONCURRENCY", 4, 1},
		{"kitten", "sitting", 2, 2},      // stopped at the limit
		{"a", "abcdefgh", 3, 3},          // lengths alone exceed the limit
		{"grpc.prot", "grpc.port", 3, 1}, // a transposition in a key
		{"db.hots", "db.host", 3, 1},
	} {
		if got := Distance(c.a, c.b, c.limit); got != c.want {
			t.Errorf("Distance(%q, %q, %d) = %d, want %d", c.a, c.b, c.limit, got, c.want)
		}
		if got := Distance(c.b, c.a, c.limit); got != c.want {
			t.Errorf("Distance(%q, %q, %d) = %d, want %d (symmetric)", c.b, c.a, c.limit, got, c.want)
		}
	}
}
