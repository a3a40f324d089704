package main

import (
	"fmt"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/multirail/multirail/train"
)

// plotSuite draws the time to target of every setting on every scenario,
// a panel per scenario: each seed's run as a dot (hollow where it missed
// the target and is counted at its whole time), the mean as a bar, and
// the ratio to the cross-fitted best fixed rate above it.
func plotSuite(path string, an train.SuiteReport, target float64) error {
	var panels []*plot.Plot
	for _, sc := range an.Scenarios {
		pl := plot.New()
		pl.Title.Text = fmt.Sprintf("%s: time to %s %% accuracy", sc, strconv.FormatFloat(100*target, 'f', -1, 64))
		pl.Y.Label.Text = "seconds"
		pl.Y.Tick.Marker = plainTicks{}
		pl.Add(plotter.NewGrid())
		ymax := 0.0
		var means plotter.Values
		var dots, missed plotter.XYs
		labels := plotter.XYLabels{}
		for i, st := range an.Settings {
			c, ok := an.Cell(sc, st, target)
			if !ok {
				means = append(means, 0)
				continue
			}
			means = append(means, c.MeanTime)
			for k, t := range c.SeedTimes {
				xy := plotter.XY{X: float64(i) + 0.12*(float64(k)-float64(len(c.SeedTimes)-1)/2), Y: t}
				if c.SeedMissed[k] {
					missed = append(missed, xy)
				} else {
					dots = append(dots, xy)
				}
				ymax = math.Max(ymax, t)
			}
			top := c.MeanTime
			for _, t := range c.SeedTimes {
				top = math.Max(top, t)
			}
			ymax = math.Max(ymax, top)
			labels.XYs = append(labels.XYs, plotter.XY{X: float64(i), Y: top})
			labels.Labels = append(labels.Labels, fmt.Sprintf("%.2fx", c.Ratio))
		}
		bars, err := plotter.NewBarChart(means, vg.Points(28))
		if err != nil {
			return err
		}
		bars.Color = railColors[0]
		bars.LineStyle.Width = 0
		pl.Add(bars)
		for _, set := range []struct {
			xy    plotter.XYs
			shape draw.GlyphDrawer
		}{{dots, draw.CircleGlyph{}}, {missed, draw.RingGlyph{}}} {
			if len(set.xy) == 0 {
				continue
			}
			sct, err := plotter.NewScatter(set.xy)
			if err != nil {
				return err
			}
			sct.GlyphStyle.Shape, sct.GlyphStyle.Radius, sct.GlyphStyle.Color = set.shape, vg.Points(2.5), railColors[1]
			pl.Add(sct)
		}
		if len(labels.XYs) > 0 {
			if err := addLabelsAbove(pl, labels); err != nil {
				return err
			}
		}
		pl.NominalX(an.Settings...)
		pl.Y.Min, pl.Y.Max = 0, 1.15*ymax
		panels = append(panels, pl)
	}
	cols := 2
	var grid [][]*plot.Plot
	for i := 0; i < len(panels); i += cols {
		row := make([]*plot.Plot, cols)
		copy(row, panels[i:min(i+cols, len(panels))])
		grid = append(grid, row)
	}
	if len(grid) == 0 {
		return fmt.Errorf("no scenario to plot")
	}
	return writeGrid(path, grid, 3.2*vg.Inch)
}
