package main

import (
	"fmt"
	"image/color"

	"github.com/multirail/multirail/train"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// plotTrainAccuracy draws test accuracy against training time, one line
// per mode, with the target as a dashed line.
func plotTrainAccuracy(path string, res []train.Result) error {
	xmax := 0.0
	for _, r := range res {
		for _, p := range r.Curve {
			xmax = max(xmax, p.Time)
		}
	}
	pl := timePlot("test accuracy of rank 0's model", "training time (s)", "test accuracy (%)", xmax*1.02, 100)
	pl.Legend.Top, pl.Legend.Left = false, false
	pl.Legend.XOffs, pl.Legend.YOffs = -vg.Millimeter*2, vg.Millimeter*2
	for i, r := range res {
		xys := make(plotter.XYs, len(r.Curve))
		for j, p := range r.Curve {
			xys[j] = plotter.XY{X: p.Time, Y: 100 * p.Accuracy}
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		l.Color = railColors[i%len(railColors)]
		l.Width = vg.Points(2)
		pl.Add(l)
		label := string(r.Mode)
		if r.TimeToTarget != nil {
			label = fmt.Sprintf("%s (%.0f %% at %.1f s)", r.Mode, 100*r.TargetAccuracy, *r.TimeToTarget)
		}
		pl.Legend.Add(label, l)
	}
	// Zoom in on the end of training, where the modes differ: from 10
	// points below the target (or below the last half's lowest point).
	lo := 100.0
	for _, r := range res {
		for _, p := range r.Curve[len(r.Curve)/2:] {
			lo = min(lo, 100*p.Accuracy)
		}
	}
	if len(res) > 0 {
		lo = min(lo-2, 100*res[0].TargetAccuracy-10)
	}
	pl.Y.Min, pl.Y.Max = max(0, lo), 100
	if len(res) > 0 {
		t := 100 * res[0].TargetAccuracy
		m, err := plotter.NewLine(plotter.XYs{{X: 0, Y: t}, {X: xmax * 1.02, Y: t}})
		if err != nil {
			return err
		}
		m.Color = color.Gray{Y: 0x70}
		m.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		pl.Add(m)
		pl.Legend.Add("target", m)
	}
	return writeGrid(path, [][]*plot.Plot{{pl}}, 3.6*vg.Inch)
}

// plotTrainDiscard draws the fraction of packets discarded per step, one
// line per mode.
func plotTrainDiscard(path string, res []train.Result) error {
	steps := 0
	for _, r := range res {
		steps = max(steps, len(r.DiscardRates))
	}
	pl := timePlot("packets discarded per step (all ranks)", "step", "discard rate (%)", float64(steps), 100)
	pl.Legend.Left = false
	pl.Legend.XOffs = -vg.Millimeter * 2
	for i, r := range res {
		xys := make(plotter.XYs, len(r.DiscardRates))
		for j, v := range r.DiscardRates {
			xys[j] = plotter.XY{X: float64(j + 1), Y: 100 * v}
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		l.Color = railColors[i%len(railColors)]
		l.Width = vg.Points(1.2)
		pl.Add(l)
		pl.Legend.Add(fmt.Sprintf("%s (mean %.1f %%)", r.Mode, 100*r.MeanDiscardRate), l)
	}
	return writeGrid(path, [][]*plot.Plot{{pl}}, 3.2*vg.Inch)
}
