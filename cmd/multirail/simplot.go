package main

import (
	"errors"
	"fmt"
	"image/color"
	"math"

	"github.com/multirail/multirail/sim"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// plotSimShares draws, one panel per scheduler, each rail's share of the
// delivered bytes over time (solid) against its share of the capacity
// offered (dashed), and writes them as one PNG to path.
func plotSimShares(path string, rep simReport) error {
	if len(rep.Results) == 0 {
		return errors.New("no results to draw")
	}
	cols := min(2, len(rep.Results))
	rows := (len(rep.Results) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for r := range grid {
		grid[r] = make([]*plot.Plot, cols)
	}
	for i, r := range rep.Results {
		pl, err := sharePlot(rep.Scenario, r)
		if err != nil {
			return fmt.Errorf("%s: %w", r.Sched, err)
		}
		grid[i/cols][i%cols] = pl
	}
	return writeGrid(path, grid, 3.4*vg.Inch)
}

func sharePlot(scenario string, r *sim.Result) (*plot.Plot, error) {
	pl := timePlot(fmt.Sprintf("%s: %s (%.1f %% efficiency)", scenario, r.Sched, 100*r.Efficiency),
		"virtual time (s)", "share of bytes (%)", r.DurationS, 140) // room for the legend above 100 %
	bin := r.Series.BinS
	shares, caps := r.Series.Shares(), r.Series.CapacityShares()
	for i, rail := range r.Rails {
		col := railColors[i%len(railColors)]
		if i < len(shares) {
			if xys := binXYs(shares[i], bin, r.DurationS); len(xys) > 0 {
				l, err := plotter.NewLine(xys)
				if err != nil {
					return nil, err
				}
				l.Color = col
				l.Width = vg.Points(1.5)
				pl.Add(l)
				pl.Legend.Add(fmt.Sprintf("%s %.0f %%", rail.Name, 100*rail.Share), l)
			}
		}
		if i < len(caps) {
			if xys := binXYs(caps[i], bin, r.DurationS); len(xys) > 0 {
				l, err := plotter.NewLine(xys)
				if err != nil {
					return nil, err
				}
				l.Color = col
				l.Width = vg.Points(1)
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
				pl.Add(l)
			}
		}
	}
	if len(r.Rails) > 0 {
		pl.Legend.Add("dashed: share of capacity", lineKey{draw.LineStyle{Color: color.Gray{Y: 0x60},
			Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}})
	}
	return pl, nil
}

// lineKey is a legend entry showing a line style.
type lineKey struct{ style draw.LineStyle }

func (k lineKey) Thumbnail(c *draw.Canvas) {
	y := c.Center().Y
	c.StrokeLine2(k.style, c.Min.X, y, c.Max.X, y)
}

// binXYs turns per-bin fractions into points at the bins' middles, in
// percent, leaving out bins without a value.
func binXYs(v []float64, bin, end float64) plotter.XYs {
	var xys plotter.XYs
	for i, f := range v {
		x := (float64(i) + 0.5) * bin
		if math.IsNaN(f) || x > end {
			continue
		}
		xys = append(xys, plotter.XY{X: x, Y: 100 * f})
	}
	return xys
}

// plotSimCDF draws the distribution of completion times, one line per
// scheduler, and writes it as a PNG to path.
func plotSimCDF(path string, rep simReport) error {
	pl := plot.New()
	unit := "message"
	if len(rep.Results) > 0 {
		unit = rep.Results[0].CompletionUnit
	}
	pl.Title.Text = fmt.Sprintf("%s: completion time per %s", rep.Scenario, unit)
	pl.X.Label.Text = "completion time (s)"
	pl.Y.Label.Text = "fraction completed within"
	pl.Y.Min, pl.Y.Max = 0, 1
	pl.Y.Tick.Marker = plainTicks{}
	pl.Add(plotter.NewGrid())
	pl.Legend.Top = false
	pl.Legend.Left = false
	pl.Legend.ThumbnailWidth = vg.Millimeter * 6
	lo, hi := math.Inf(1), 0.0
	for _, r := range rep.Results {
		for _, p := range r.CompletionCDF {
			if p.S > 0 {
				lo, hi = min(lo, p.S), max(hi, p.S)
			}
		}
	}
	logX := hi > 0 && hi/lo > 50
	if logX {
		pl.X.Scale = plot.LogScale{}
		pl.X.Tick.Marker = plot.LogTicks{Prec: -1}
	} else {
		pl.X.Tick.Marker = plainTicks{}
		pl.X.Min = 0
	}
	drawn := 0
	for i, r := range rep.Results {
		var xys plotter.XYs
		prev := 0.0
		for _, p := range r.CompletionCDF {
			if logX && p.S <= 0 {
				continue
			}
			// A step: the fraction rises at each time.
			xys = append(xys, plotter.XY{X: p.S, Y: prev}, plotter.XY{X: p.S, Y: p.Fraction})
			prev = p.Fraction
		}
		if len(xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return fmt.Errorf("%s: %w", r.Sched, err)
		}
		l.Color = railColors[i%len(railColors)]
		l.Width = vg.Points(1.5)
		pl.Add(l)
		pl.Legend.Add(fmt.Sprintf("%s (p99 %s)", r.Sched, simDur(r.P99CompletionS)), l)
		drawn++
	}
	if drawn == 0 {
		pl.Title.Text += " (nothing completed)"
	}
	img := vgimg.NewWith(vgimg.UseWH(7*vg.Inch, 4.2*vg.Inch), vgimg.UseDPI(96))
	pl.Draw(draw.New(img))
	return writePNG(path, img)
}
