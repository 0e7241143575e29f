package main

import (
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

func savePNG(c *vgimg.Canvas, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// chart draws throughput and p99 against concurrency, one line per run.
func (r *Results) chart(path string) error {
	tp, lat := plot.New(), plot.New()
	tp.Title.Text, tp.X.Label.Text, tp.Y.Label.Text = "Throughput", "concurrency", "requests/s"
	lat.Title.Text, lat.X.Label.Text, lat.Y.Label.Text = "p99 latency", "concurrency", "ms"
	for i, run := range r.Runs {
		var pts, p99 plotter.XYs
		for _, f := range run.Figures {
			pts = append(pts, plotter.XY{X: float64(f.Concurrency), Y: f.Throughput})
			if !f.MeanLatency {
				p99 = append(p99, plotter.XY{X: float64(f.Concurrency), Y: f.P99ms})
			}
		}
		if err := addLine(tp, run.Name, pts, i); err != nil {
			return err
		}
		if len(p99) > 0 {
			if err := addLine(lat, run.Name, p99, i); err != nil {
				return err
			}
		}
	}
	// Throughputs span two orders of magnitude (a replay lookup against a
	// charge), and the concurrencies 1 to 64: log scales keep both legible.
	tp.Y.Scale, tp.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	for _, p := range []*plot.Plot{tp, lat} {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, concTicks(r.Runs)
		p.Legend.Top, p.Legend.Left = true, true
		p.Add(plotter.NewGrid())
	}
	img := vgimg.New(16*vg.Centimeter*2, 12*vg.Centimeter)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Centimeter, PadY: vg.Centimeter / 2, PadLeft: vg.Centimeter / 2, PadRight: vg.Centimeter / 2, PadTop: vg.Centimeter / 2, PadBottom: vg.Centimeter / 2}
	tp.Draw(tiles.At(dc, 0, 0))
	lat.Draw(tiles.At(dc, 1, 0))
	return savePNG(img, path)
}

// concTicks marks the concurrencies that ran, and nothing else.
func concTicks(runs []Run) plot.ConstantTicks {
	var ticks plot.ConstantTicks
	seen := map[int]bool{}
	for _, run := range runs {
		for _, f := range run.Figures {
			if !seen[f.Concurrency] {
				seen[f.Concurrency] = true
				ticks = append(ticks, plot.Tick{Value: float64(f.Concurrency), Label: fmt.Sprint(f.Concurrency)})
			}
		}
	}
	return ticks
}

func addLine(p *plot.Plot, name string, pts plotter.XYs, i int) error {
	if len(pts) == 0 {
		return nil
	}
	l, s, err := plotter.NewLinePoints(pts)
	if err != nil {
		return err
	}
	c := plotutil.Color(i)
	if c == nil {
		c = color.Black
	}
	l.Color, s.Color = c, c
	l.Dashes = plotutil.Dashes(i / 7)
	s.Shape = plotutil.Shape(i)
	p.Add(l, s)
	p.Legend.Add(name, l, s)
	return nil
}
