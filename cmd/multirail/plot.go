package main

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// goodputPanel is one scheduler's goodput over time.
type goodputPanel struct {
	Title string
	Rails []string    // rail names, for the legend
	T     []float64   // x: seconds since start
	Bps   [][]float64 // Bps[rail][i] at T[i], bits per second
	End   float64     // length of the run in seconds (the x axis ends there)
	// Marker, when > 0, draws a vertical line at that time.
	Marker      float64
	MarkerLabel string
}

var railColors = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // blue
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, // orange
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // green
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, // purple
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}, // brown
	color.RGBA{R: 0xe3, G: 0x77, B: 0xc2, A: 0xff}, // pink
}

// plotGoodput draws one panel per entry of panels, two columns, all with
// the same axes, and writes them as one PNG to path.
func plotGoodput(path string, panels []goodputPanel) error {
	if len(panels) == 0 {
		return errors.New("no panels to draw")
	}
	// Common axes: time up to the longest run, rate up to the largest
	// total plus headroom for the legend.
	var xmax, ymax float64
	for _, p := range panels {
		if len(p.Bps) != len(p.Rails) {
			return fmt.Errorf("panel %q: %d rail series for %d rails", p.Title, len(p.Bps), len(p.Rails))
		}
		for _, s := range p.Bps {
			if len(s) != len(p.T) {
				return fmt.Errorf("panel %q: %d values for %d times", p.Title, len(s), len(p.T))
			}
		}
		for i, t := range p.T {
			xmax = max(xmax, t)
			var tot float64
			for _, s := range p.Bps {
				tot += s[i]
			}
			ymax = max(ymax, tot/1e6)
		}
		xmax = max(xmax, p.Marker, p.End)
	}
	if ymax <= 0 {
		ymax = 1
	}
	ymax *= 1.75 // room for the legend above the total line

	cols := min(2, len(panels))
	rows := (len(panels) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for r := range grid {
		grid[r] = make([]*plot.Plot, cols)
	}
	for i, p := range panels {
		pl, err := goodputPlot(p, xmax, ymax)
		if err != nil {
			return fmt.Errorf("panel %q: %w", p.Title, err)
		}
		grid[i/cols][i%cols] = pl
	}
	return writeGrid(path, grid, 3.2*vg.Inch)
}

// writeGrid draws a grid of plots (nil cells stay empty), each panel
// 6.5 inches wide and panelH high, aligned, into a PNG at path.
func writeGrid(path string, grid [][]*plot.Plot, panelH vg.Length) error {
	const panelW = 6.5 * vg.Inch
	rows, cols := len(grid), len(grid[0])
	img := vgimg.NewWith(vgimg.UseWH(vg.Length(cols)*panelW, vg.Length(rows)*panelH), vgimg.UseDPI(96))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(grid, tiles, dc)
	for r := range grid {
		for c, pl := range grid[r] {
			if pl != nil {
				pl.Draw(canvases[r][c])
			}
		}
	}
	return writePNG(path, img)
}

// timePlot returns an empty panel over time: axes from 0 to xmax and
// ymax, plain ticks, a grid and the legend at the top left.
func timePlot(title, xlabel, ylabel string, xmax, ymax float64) *plot.Plot {
	pl := plot.New()
	pl.Title.Text = title
	pl.X.Label.Text = xlabel
	pl.Y.Label.Text = ylabel
	pl.X.Min, pl.X.Max = 0, xmax
	pl.Y.Min, pl.Y.Max = 0, ymax
	pl.X.Tick.Marker = plainTicks{}
	pl.Y.Tick.Marker = plainTicks{}
	pl.Add(plotter.NewGrid())
	pl.Legend.Top = true
	pl.Legend.Left = true
	pl.Legend.XOffs = vg.Millimeter * 2
	pl.Legend.YOffs = -vg.Millimeter
	pl.Legend.ThumbnailWidth = vg.Millimeter * 6
	return pl
}

func goodputPlot(p goodputPanel, xmax, ymax float64) (*plot.Plot, error) {
	pl := timePlot(p.Title, "time (s)", "goodput (Mbit/s)", xmax, ymax)

	total := make(plotter.XYs, len(p.T))
	for i, t := range p.T {
		total[i].X = t
	}
	for r, series := range p.Bps {
		xys := make(plotter.XYs, len(p.T))
		for i, t := range p.T {
			xys[i] = plotter.XY{X: t, Y: series[i] / 1e6}
			total[i].Y += series[i] / 1e6
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		l.Color = railColors[r%len(railColors)]
		l.Width = vg.Points(1.5)
		pl.Add(l)
		pl.Legend.Add(fmt.Sprintf("rail %d %s", r, p.Rails[r]), l)
	}
	l, err := plotter.NewLine(total)
	if err != nil {
		return nil, err
	}
	l.Color = color.Black
	l.Width = vg.Points(2.5)
	pl.Add(l)
	pl.Legend.Add("total", l)
	if p.Marker > 0 {
		m, err := plotter.NewLine(plotter.XYs{{X: p.Marker, Y: 0}, {X: p.Marker, Y: ymax}})
		if err != nil {
			return nil, err
		}
		m.Color = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
		m.Width = vg.Points(1.5)
		m.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		pl.Add(m)
		if p.MarkerLabel != "" {
			pl.Legend.Add(p.MarkerLabel, m)
		}
	}
	return pl, nil
}

// plotEfficiency draws a bar chart of efficiency (a fraction, shown in
// percent) per name and writes it as a PNG to path.
func plotEfficiency(path string, names []string, eff []float64) error {
	if len(names) == 0 || len(names) != len(eff) {
		return fmt.Errorf("%d names for %d values", len(names), len(eff))
	}
	pl := plot.New()
	pl.Title.Text = "Efficiency per scheduler (goodput / available capacity)"
	pl.Y.Label.Text = "efficiency (%)"
	vals := make(plotter.Values, len(eff))
	labels := plotter.XYLabels{}
	for i, e := range eff {
		vals[i] = 100 * e
		labels.XYs = append(labels.XYs, plotter.XY{X: float64(i), Y: 100 * e})
		labels.Labels = append(labels.Labels, fmt.Sprintf("%.1f %%", 100*e))
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(40))
	if err != nil {
		return err
	}
	bars.Color = railColors[0]
	bars.LineStyle.Width = 0
	pl.Add(plotter.NewGrid(), bars)
	if err := addLabelsAbove(pl, labels); err != nil {
		return err
	}
	pl.NominalX(names...)
	pl.Y.Tick.Marker = plainTicks{}
	pl.Y.Min, pl.Y.Max = 0, 110
	w := max(4*vg.Inch, vg.Length(len(names))*1.1*vg.Inch)
	img := vgimg.NewWith(vgimg.UseWH(w, 3.5*vg.Inch), vgimg.UseDPI(96))
	pl.Draw(draw.New(img))
	return writePNG(path, img)
}

// addLabelsAbove adds labels to pl, each centred just above its point.
func addLabelsAbove(pl *plot.Plot, labels plotter.XYLabels) error {
	lab, err := plotter.NewLabels(labels)
	if err != nil {
		return err
	}
	for i := range lab.TextStyle {
		lab.TextStyle[i].XAlign = draw.XCenter
		lab.TextStyle[i].YAlign = draw.YBottom
	}
	lab.Offset = vg.Point{Y: vg.Points(3)}
	pl.Add(lab)
	return nil
}

// plainTicks are plot.DefaultTicks labelled without trailing zeros.
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(math.Round(ticks[i].Value*1e6)/1e6, 'f', -1, 64)
		}
	}
	return ticks
}

func writePNG(path string, img *vgimg.Canvas) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = vgimg.PngCanvas{Canvas: img}.WriteTo(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
