package producer

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// On a terminal the bar is redrawn in place and ends with a newline; without one, a log line per
// `every` files.
func TestProgress(t *testing.T) {
	t.Parallel()
	var term bytes.Buffer
	p := newProgress(&term, zap.NewNop(), 10, 12, 10)
	p.skipped(2)
	p.add(6, 4, 0)
	p.finish()
	out := term.String()
	require.True(t, strings.HasPrefix(out, "\r["), out)
	require.True(t, strings.HasSuffix(out, "\n"), out)
	last := out[strings.LastIndex(out, "\r"):]
	require.Contains(t, last, "[########################] 10/10 · seen 12 · new 6 · already 4 · skipped 2")
	require.Contains(t, last, "ETA 0s")

	core, logs := observer.New(zap.InfoLevel)
	p = newProgress(nil, zap.New(core), 4, 10, 10)
	for range 5 {
		p.add(2, 0, 0)
	}
	p.finish()
	lines := logs.FilterMessage("producer progress").All()
	require.Len(t, lines, 2, "at 4 and 8 of 10 files")
	require.EqualValues(t, 4, lines[0].ContextMap()["done"])
	require.EqualValues(t, 8, lines[1].ContextMap()["done"])
}
