// Command evalplot draws the PNG plots of docs/evaluation.md from the JSON results that
// internal/eval writes (go tool -modfile=tools/go.mod task eval runs both).
//
//	go run . -in ../../docs/eval
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

type stats struct {
	Done          int     `json:"done"`
	WaitP50Ms     float64 `json:"wait_p50_ms"`
	WaitP95Ms     float64 `json:"wait_p95_ms"`
	WaitP99Ms     float64 `json:"wait_p99_ms"`
	ExecPerSec    float64 `json:"exec_per_sec"`
	JobsPerWorker []int   `json:"jobs_per_worker"`
}

type run struct {
	Topology string  `json:"topology"`
	Load     string  `json:"load"`
	Rate     float64 `json:"offered_rate"`
	Slots    int     `json:"slots"`
	Workers  int     `json:"worker_processes"`
	Stats    stats   `json:"stats"`
}

func main() {
	in := flag.String("in", "docs/eval", "directory with the JSON results; the PNGs are written next to them")
	flag.Parse()
	steps := []struct {
		file string
		draw func(dir string, raw json.RawMessage) error
	}{
		{"topology.json", topology},
		{"scaling.json", scaling},
		{"many.json", many},
	}
	for _, s := range steps {
		b, err := os.ReadFile(filepath.Join(*in, s.file))
		if os.IsNotExist(err) {
			fmt.Println("evalplot: no", s.file, "- skipped")
			continue
		}
		if err != nil {
			fatal(err)
		}
		var doc struct {
			Results json.RawMessage `json:"results"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			fatal(fmt.Errorf("%s: %w", s.file, err))
		}
		if err := s.draw(*in, doc.Results); err != nil {
			fatal(fmt.Errorf("%s: %w", s.file, err))
		}
	}
}

func label(r run) string {
	if r.Load == "drain" {
		return r.Topology + " drain"
	}
	return r.Topology + " " + strconv.FormatFloat(r.Rate, 'f', 0, 64) + "/s"
}

// topology: submit→start p50/p95/p99 per topology and load, and the drain throughput.
func topology(dir string, raw json.RawMessage) error {
	var runs []run
	if err := json.Unmarshal(raw, &runs); err != nil {
		return err
	}
	p := plot.New()
	p.Title.Text = "Submit→start latency at fixed offered rates (capacity 150 jobs/s)\nA = 1 server + 2 workers × 4 slots, B = 4 × --role=all × 2 slots"
	p.Y.Label.Text = "ms"
	all := runs
	runs = nil
	var names []string
	for _, r := range all {
		if r.Load == "rate" { // drains queue by design: their waits are in the table, not here
			runs = append(runs, r)
			names = append(names, label(r))
		}
	}
	w := vg.Points(14)
	for i, pick := range []struct {
		name string
		f    func(stats) float64
	}{{"p50", func(s stats) float64 { return s.WaitP50Ms }}, {"p95", func(s stats) float64 { return s.WaitP95Ms }}, {"p99", func(s stats) float64 { return s.WaitP99Ms }}} {
		var v plotter.Values
		for _, r := range runs {
			v = append(v, pick.f(r.Stats))
		}
		b, err := plotter.NewBarChart(v, w)
		if err != nil {
			return err
		}
		b.Offset = vg.Length(i-1) * w
		b.Color = plotutil.Color(i)
		b.LineStyle.Width = 0
		p.Add(b)
		p.Legend.Add(pick.name, b)
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.NominalX(names...)
	if err := p.Save(9*vg.Inch, 4.5*vg.Inch, filepath.Join(dir, "topology_latency.png")); err != nil {
		return err
	}
	t := plot.New()
	t.Title.Text = "Drain of 2,000 mixed jobs: execution throughput (8 slots; ideal 150 jobs/s)"
	t.Y.Label.Text = "jobs/s"
	var v plotter.Values
	var dn []string
	for _, r := range all {
		if r.Load == "drain" {
			v = append(v, r.Stats.ExecPerSec)
			dn = append(dn, r.Topology)
		}
	}
	b, err := plotter.NewBarChart(v, vg.Points(40))
	if err != nil {
		return err
	}
	b.Color = plotutil.Color(0)
	t.Add(b)
	t.NominalX(dn...)
	return t.Save(5*vg.Inch, 4*vg.Inch, filepath.Join(dir, "topology_drain.png"))
}

// scaling: NFR-010, execution throughput against worker processes, with the ideal line.
func scaling(dir string, raw json.RawMessage) error {
	var runs []run
	if err := json.Unmarshal(raw, &runs); err != nil {
		return err
	}
	p := plot.New()
	p.Title.Text = "NFR-010: throughput vs worker processes (100 ms sleep jobs)"
	p.X.Label.Text = "worker processes"
	p.Y.Label.Text = "jobs/s (first start → last completion)"
	var got, ideal plotter.XYs
	var ticks []plot.Tick
	for _, r := range runs {
		got = append(got, plotter.XY{X: float64(r.Workers), Y: r.Stats.ExecPerSec})
		ideal = append(ideal, plotter.XY{X: float64(r.Workers), Y: float64(r.Slots) / 0.1})
		ticks = append(ticks, plot.Tick{Value: float64(r.Workers), Label: strconv.Itoa(r.Workers)})
	}
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Scale = plot.LogScale{}
	var yt []plot.Tick
	for _, y := range []float64{100, 200, 500, 1000, 2000, 5000} {
		yt = append(yt, plot.Tick{Value: y, Label: strconv.FormatFloat(y, 'f', 0, 64)})
	}
	p.Y.Tick.Marker = plot.ConstantTicks(yt)
	l, pts, err := plotter.NewLinePoints(got)
	if err != nil {
		return err
	}
	l.Color, pts.Color = plotutil.Color(0), plotutil.Color(0)
	il, err := plotter.NewLine(ideal)
	if err != nil {
		return err
	}
	il.Color = color.Gray{Y: 128}
	il.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
	p.Add(l, pts, il)
	p.Legend.Add("measured", l, pts)
	p.Legend.Add("ideal (slots / 0.1 s)", il)
	p.Legend.Top, p.Legend.Left = false, false
	return p.Save(6*vg.Inch, 4.5*vg.Inch, filepath.Join(dir, "scaling.png"))
}

// many: NFR-011, jobs done by each of the worker processes, most to least.
func many(dir string, raw json.RawMessage) error {
	var res struct {
		Workers int `json:"worker_processes"`
		Run     run `json:"run"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return err
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("NFR-011: jobs per worker, %d workers × 1 slot (%d of them used)", res.Workers, len(res.Run.Stats.JobsPerWorker))
	p.X.Label.Text = "worker, most to least jobs"
	p.Y.Label.Text = "jobs done"
	var v plotter.Values
	for _, n := range res.Run.Stats.JobsPerWorker {
		v = append(v, float64(n))
	}
	b, err := plotter.NewBarChart(v, vg.Points(3))
	if err != nil {
		return err
	}
	b.Color = plotutil.Color(0)
	b.LineStyle.Width = 0
	p.Add(b)
	return p.Save(8*vg.Inch, 4*vg.Inch, filepath.Join(dir, "many_jobs_per_worker.png"))
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "evalplot:", err)
	os.Exit(1)
}
