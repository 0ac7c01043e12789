package admin

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTimeArg(t *testing.T) {
	t.Parallel()
	now := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	for arg, want := range map[string]time.Time{
		"2026-01-02T15:04:05Z":      time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC),
		"2026-01-02T15:04:05+01:00": time.Date(2026, 1, 2, 14, 4, 5, 0, time.UTC),
		"2h":                        now.Add(-2 * time.Hour),
		"90s":                       now.Add(-90 * time.Second),
	} {
		got, err := timeArg("--created-after", arg, now)
		require.NoError(t, err, arg)
		require.True(t, want.Equal(got), "%s: %v, want %v", arg, got, want)
	}
	for _, arg := range []string{"yesterday", "-2h", "0s", "2026-01-02"} {
		_, err := timeArg("--created-after", arg, now)
		require.ErrorContains(t, err, `--created-after "`+arg+`"`, arg)
	}
}
