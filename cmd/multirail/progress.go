package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/multirail/multirail/emu"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// progress shows per-rail goodput on stderr while a run goes: bars on a
// terminal, a line a second otherwise.
type progress struct {
	mu       sync.Mutex
	w        io.Writer
	quiet    bool
	label    string
	names    []string
	total    time.Duration
	p        *mpb.Progress
	bars     []*mpb.Bar
	rates    []float64
	last     []uint64
	lastT    time.Duration
	lastLine time.Duration
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func newProgress(w io.Writer, quiet bool, label string, specs []emu.Spec, total time.Duration) *progress {
	pr := &progress{w: w, quiet: quiet, label: label, total: total,
		rates: make([]float64, len(specs)), last: make([]uint64, len(specs))}
	for _, s := range specs {
		pr.names = append(pr.names, s.String())
	}
	if quiet {
		return pr
	}
	if isTerminal(w) {
		pr.p = mpb.New(mpb.WithOutput(w), mpb.WithWidth(40), mpb.WithRefreshRate(150*time.Millisecond))
		for i, n := range pr.names {
			i := i
			bar := pr.p.AddBar(total.Milliseconds(),
				mpb.PrependDecorators(decor.Name(fmt.Sprintf("%-14s %-16s", label, n))),
				mpb.AppendDecorators(decor.Any(func(decor.Statistics) string {
					pr.mu.Lock()
					defer pr.mu.Unlock()
					return fmt.Sprintf("%8s Mbit/s", mbit(pr.rates[i]))
				})))
			pr.bars = append(pr.bars, bar)
		}
	} else {
		fmt.Fprintf(w, "%s: running for %v on %s\n", label, total, strings.Join(pr.names, ","))
	}
	return pr
}

func (pr *progress) update(elapsed time.Duration, perRail []uint64) {
	if pr.quiet {
		return
	}
	pr.mu.Lock()
	dt := (elapsed - pr.lastT).Seconds()
	if dt > 0 {
		for i, b := range perRail {
			if i < len(pr.rates) {
				pr.rates[i] = float64(b-pr.last[i]) * 8 / dt
				pr.last[i] = b
			}
		}
		pr.lastT = elapsed
	}
	line := pr.p == nil && elapsed-pr.lastLine >= time.Second
	if line {
		pr.lastLine = elapsed
	}
	var parts []string
	for i, r := range pr.rates {
		parts = append(parts, pr.names[i]+" "+mbit(r))
	}
	pr.mu.Unlock()
	for _, bar := range pr.bars {
		bar.SetCurrent(min(elapsed.Milliseconds(), pr.total.Milliseconds()))
	}
	if line {
		fmt.Fprintf(pr.w, "  %s t=%4.1fs Mbit/s: %s\n", pr.label, elapsed.Seconds(), strings.Join(parts, "  "))
	}
}

func (pr *progress) done() {
	if pr.p == nil {
		return
	}
	for _, bar := range pr.bars {
		bar.SetCurrent(pr.total.Milliseconds())
	}
	pr.p.Wait()
}
