package labbench

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/multirail/multirail/lab"
)

// stampedLine is a line of a run's stdout and when the bench read it.
type stampedLine struct {
	text string
	at   time.Time
}

// lineClock is an io.Writer that notes when each line ends.
type lineClock struct {
	mu      sync.Mutex
	partial []byte
	lines   []stampedLine
	now     func() time.Time // time.Now unless a test sets it
}

// Write implements io.Writer.
func (c *lineClock) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now
	if c.now != nil {
		now = c.now
	}
	at := now()
	rest := p
	for {
		i := strings.IndexByte(string(rest), '\n')
		if i < 0 {
			c.partial = append(c.partial, rest...)
			return len(p), nil
		}
		c.partial = append(c.partial, rest[:i]...)
		c.lines = append(c.lines, stampedLine{text: string(c.partial), at: at})
		c.partial = c.partial[:0]
		rest = rest[i+1:]
	}
}

// window is the time in which one size of a run ran.
type window struct{ from, to time.Time }

// windows are the windows of the result lines (isResult) in order: each
// from the previous result line, the first from the last header line
// before it (a line starting with "#", but gloo_osu's per-size "busy"
// note); a first result line without a header before it has no window
// (zero).
func (c *lineClock) windows(isResult func(string) bool) []window {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var (
		out  []window
		prev time.Time
	)
	for _, l := range c.lines {
		switch {
		case isResult(l.text):
			out = append(out, window{from: prev, to: l.at})
			prev = l.at
		case len(out) == 0 && strings.HasPrefix(l.text, "#") && !strings.HasPrefix(l.text, busyPrefix):
			prev = l.at
		}
	}
	return out
}

// resultLine tells the result lines of a system's program: mrosu's and
// gloo_osu.py's "MROSU ..." lines, and the rows of `multirail osu`'s
// table (every line not starting with "#").
func resultLine(system string) func(string) bool {
	if IsMPI(system) || IsTorch(system) {
		return func(s string) bool { return strings.HasPrefix(s, "MROSU ") }
	}
	return func(s string) bool { s = strings.TrimSpace(s); return s != "" && !strings.HasPrefix(s, "#") }
}

// movesBytes reports whether test's results get a CPU s/GB: the
// collectives that move data (not the barrier, not the point-to-point
// tests, whose bus bandwidth is not the ranks' sum).
func movesBytes(test string) bool {
	switch test {
	case "bcast", "allreduce", "allgather", "reduce-scatter", "alltoall":
		return true
	}
	return false
}

// busBytes are the bytes r's calls moved: every rank's bus bytes per
// call (BusBWBps/8 x AvgUs) times the calls, warm-up included.
func busBytes(r CollResult) float64 {
	return float64(r.Ranks) * float64(r.Iters+r.Warmup) * r.BusBWBps / 8 * r.AvgUs / 1e6
}

// addCPU sets the CPU s/GB of res (in result-line order) from the busy
// CPU time of samples in each result's window, where both are known.
func addCPU(res []CollResult, wins []window, samples []lab.CPUSample) {
	if len(wins) != len(res) {
		return // not the lines the results came from: no figure rather than a wrong one
	}
	for i := range res {
		r := &res[i]
		w := wins[i]
		if !movesBytes(r.Test) || w.from.IsZero() || r.BusBWBps <= 0 {
			continue
		}
		busy, ok := lab.CPUBetween(samples, w.from, w.to)
		gb := busBytes(*r) / 1e9
		if !ok || gb <= 0 {
			continue
		}
		r.CPUSeconds, r.GBMoved = busy.Seconds(), gb
		r.CPUSPerGB = busy.Seconds() / gb
	}
}

// addRingCPU sets the CPU s/GB of iperf3-ring's one result from the busy
// CPU time of samples in the ring's window.
func addRingCPU(res []CollResult, w window, samples []lab.CPUSample) {
	if len(res) != 1 || res[0].GBMoved <= 0 {
		return
	}
	r := &res[0]
	busy, ok := lab.CPUBetween(samples, w.from, w.to)
	if !ok {
		r.GBMoved = 0
		return
	}
	r.CPUSeconds = busy.Seconds()
	r.CPUSPerGB = r.CPUSeconds / r.GBMoved
}

// runRing runs iperf3-ring (lab.Ring) for p's ring duration: its result
// (RingTest, size 0) has the mean per-host goodput as its bus bandwidth,
// each host's in HostsBps, the run's seconds as AvgUs and the bytes every
// receiver got as GBMoved; w is the window the flows ran in.
func runRing(ctx context.Context, p CollPlan, l *lab.Lab) (res []CollResult, w window, err error) {
	rr, err := l.Ring(ctx, p.ringDuration())
	if err != nil {
		return nil, w, err
	}
	w = window{from: rr.Start, to: rr.End}
	r := CollResult{Test: RingTest, Ranks: rr.Hosts, BusBWBps: rr.MeanHostBps(), HostsBps: rr.HostBps(),
		AvgUs: float64(rr.End.Sub(rr.Start).Microseconds()), Iters: 1, GBMoved: float64(rr.Bytes()) / 1e9}
	return []CollResult{r}, w, nil
}
