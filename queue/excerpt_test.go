package queue_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
)

func TestExcerpt(t *testing.T) {
	t.Parallel()
	require.Equal(t, `"abc"`, queue.Excerpt("abc"))
	require.Equal(t, `"a\x00\n\x1b[31m"`, queue.Excerpt("a\x00\n\x1b[31m"), "control characters are escaped")
	require.Equal(t, `"é"`, queue.Excerpt("é"), "printable Unicode is kept")
	for _, s := range []string{
		strings.Repeat("k", 400<<10),
		strings.Repeat("é", 100),
		strings.Repeat("\x00", 100),
		strings.Repeat("\U0010ffff", 100),
		strings.Repeat("\xff", 100),
	} {
		got := queue.Excerpt(s)
		require.LessOrEqual(t, len(got), queue.MaxExcerpt+2+len("…"), "%.20q", s)
		require.True(t, strings.HasSuffix(got, "…"))
		require.True(t, utf8.ValidString(got))
		require.NotContains(t, got, "\n")
	}
}
