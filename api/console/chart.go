package console

import (
	"fmt"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
)

// chart is a queue's last hour as inline SVG bars, one per minute: its height the attempts
// finished that minute, its failed part drawn apart. The geometry is computed here so the page
// needs no script and no style attribute (the console's Content-Security-Policy forbids inline
// styles); the classes colour it.
type chart struct {
	Bars             []bar
	Max              int64 // the tallest minute
	Done, Failed     int64 // the hour's totals
	Width, Height    int
	FromText, ToText string
}

type bar struct {
	X, W                float64
	DoneY, DoneH        float64
	FailY, FailH        float64
	Title               string
	Done, Failed, Total int64
}

const (
	chartW, chartH = 600, 80
)

// chartOf lays out GetQueueStats' last_hour; nil when the server sends none.
func chartOf(st *jqv1.QueueStats) *chart {
	mins := st.GetLastHour()
	if len(mins) == 0 {
		return nil
	}
	c := &chart{Width: chartW, Height: chartH}
	for _, m := range mins {
		c.Max = max(c.Max, m.GetDone()+m.GetFailed())
		c.Done += m.GetDone()
		c.Failed += m.GetFailed()
	}
	c.FromText = mins[0].GetMinute().AsTime().UTC().Format("15:04")
	c.ToText = mins[len(mins)-1].GetMinute().AsTime().UTC().Format("15:04")
	w := float64(chartW) / float64(len(mins))
	for i, m := range mins {
		b := bar{X: float64(i) * w, W: max(w-1, 1), Done: m.GetDone(), Failed: m.GetFailed(), Total: m.GetDone() + m.GetFailed()}
		if c.Max > 0 {
			b.FailH = float64(chartH) * float64(m.GetFailed()) / float64(c.Max)
			b.DoneH = float64(chartH) * float64(m.GetDone()) / float64(c.Max)
		}
		b.FailY = chartH - b.FailH
		b.DoneY = b.FailY - b.DoneH
		b.Title = fmt.Sprintf("%s UTC: %d done, %d failed", m.GetMinute().AsTime().UTC().Format("15:04"), m.GetDone(), m.GetFailed())
		c.Bars = append(c.Bars, b)
	}
	return c
}
