package producer

import (
	"fmt"
	"io"
	"strings"
	"time"

	"go.uber.org/zap"
)

// progress shows how a pass advances: a bar redrawn in place on a terminal, or a log line every
// `every` files otherwise.
type progress struct {
	term  io.Writer // nil: log lines
	log   *zap.Logger
	every int

	seen, total                 int // files matching the globs; files to submit this pass
	created, existing, skippedN int
	done                        int // of total
	start, lastDraw             time.Time
	nextLog                     int
}

func newProgress(term io.Writer, log *zap.Logger, every, seen, total int) *progress {
	p := &progress{term: term, log: log, every: max(1, every), seen: seen, total: total, start: time.Now()}
	p.nextLog = p.every
	p.draw(true)
	return p
}

// skipped counts files the scan skipped (they are not part of total).
func (p *progress) skipped(n int) { p.skippedN += n }

// add counts a submitted batch.
func (p *progress) add(created, existing, skipped int) {
	p.created += created
	p.existing += existing
	p.skippedN += skipped
	p.done += created + existing + skipped
	if p.term != nil {
		p.draw(false)
		return
	}
	if p.done >= p.nextLog {
		p.log.Info("producer progress", zap.Int("done", p.done), zap.Int("of", p.total),
			zap.Int("new_jobs", p.created), zap.Int("already_submitted", p.existing), zap.Int("skipped", p.skippedN),
			zap.Float64("files_per_sec", p.rate()), zap.Duration("eta", p.eta()))
		p.nextLog = (p.done/p.every + 1) * p.every
	}
}

func (p *progress) finish() {
	if p.term != nil {
		p.draw(true)
		fmt.Fprintln(p.term)
	}
}

func (p *progress) rate() float64 {
	s := time.Since(p.start).Seconds()
	if s <= 0 {
		return 0
	}
	return float64(p.done) / s
}

func (p *progress) eta() time.Duration {
	r := p.rate()
	if r <= 0 || p.done >= p.total {
		return 0
	}
	return time.Duration(float64(p.total-p.done) / r * float64(time.Second)).Round(time.Second)
}

// draw redraws the bar, at most ten times a second unless forced.
func (p *progress) draw(force bool) {
	if p.term == nil || (!force && time.Since(p.lastDraw) < 100*time.Millisecond) {
		return
	}
	p.lastDraw = time.Now()
	const width = 24
	filled := width
	if p.total > 0 {
		filled = width * p.done / p.total
	}
	fmt.Fprintf(p.term, "\r[%s%s] %d/%d · seen %d · new %d · already %d · skipped %d · %.0f/s · ETA %s   ",
		strings.Repeat("#", filled), strings.Repeat("-", width-filled), p.done, p.total, p.seen,
		p.created, p.existing, p.skippedN, p.rate(), p.eta())
}
