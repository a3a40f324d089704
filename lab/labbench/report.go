package labbench

import (
	"fmt"
	"time"

	"github.com/multirail/multirail/lab"
)

// Result is one (system, size, phase) of the report.
type Result struct {
	System     string  `json:"system"`
	Phase      string  `json:"phase"` // "static" or "dynamic"
	Size       int     `json:"size"`
	GoodputBps float64 `json:"goodput_bps"`
	// CeilingFraction is GoodputBps / ceiling_bps.
	CeilingFraction float64 `json:"ceiling_fraction"`
	// RailsBps is the goodput per rail; RailsSource says where it was
	// measured: "receiver" (per connection, subflow or multirail rail at
	// the receiver) or "tbf" (sender's tbf byte counters x 1448/1514,
	// less the competing stream on rail0).
	RailsBps    []float64 `json:"rails_bps,omitempty"`
	RailsSource string    `json:"rails_source,omitempty"`
	// CompetingBps is the competing stream's goodput (dynamic phase).
	CompetingBps *float64 `json:"competing_bps,omitempty"`
	// CPUsPerGB is the busy CPU time of the whole machine (/proc/stat: every
	// process and the kernel, both hosts and the shaping, which share it)
	// during the phase, in seconds per GB (1e9 bytes) delivered; in the
	// dynamic phase it includes the competing stream's.
	CPUsPerGB *float64 `json:"cpu_s_per_gb,omitempty"`
	// Window is the messages in flight (multirail, Open MPI).
	Window   int    `json:"window,omitempty"`
	MPTCP    *bool  `json:"mptcp,omitempty"`
	Subflows int    `json:"subflows,omitempty"`
	Note     string `json:"note,omitempty"`
	Error    string `json:"error,omitempty"`
}

// Series is one run's goodput over time, for results.json and plots.
type Series struct {
	System  string      `json:"system"`
	Size    int         `json:"size"`
	BucketS float64     `json:"bucket_s"`
	Total   []float64   `json:"total_bps"`
	Rails   [][]float64 `json:"rails_bps"`
	// Competing is the competing stream's goodput from T/2 on.
	Competing []float64 `json:"competing_bps"`
}

// Report is lab bench's JSON output.
type Report struct {
	CeilingBps float64   `json:"ceiling_bps"`
	RatesBps   []float64 `json:"rates_bps"`
	// DynamicFairBps is the goodput left for the system once the
	// competing stream has its fair half of rail0.
	DynamicFairBps float64 `json:"dynamic_fair_bps"`
	DurationS      float64 `json:"duration_s"`
	BucketS        float64 `json:"bucket_s"`
	CC             string  `json:"cc"`
	// Competitor is what made the competing stream: "iperf3" or "go";
	// CompetitorNote says why it fell back to the Go stream, if it did.
	Competitor     string   `json:"competitor"`
	CompetitorNote string   `json:"competitor_note,omitempty"`
	Sizes          []int    `json:"sizes"`
	Systems        []string `json:"systems"`
	Skipped        []Skip   `json:"skipped"`
	Results        []Result `json:"results"`
	Series         []Series `json:"series,omitempty"`

	duration time.Duration
}

// Run is what one (system, size) run measured.
type Run struct {
	System string
	Size   int
	Window int
	// Rails[rail][bucket] and Total[bucket]: payload bytes since the
	// epoch, bucketed by Bucket. Rails is nil when not measured.
	Rails       [][]int64
	Total       []int64
	RailsSource string
	// MPTCP, for the mptcp system, says whether the connection was MPTCP
	// and Subflows the most subflows it had at once.
	MPTCP    *bool
	Subflows int
	Note     string
	// Load is the competing stream's measurement, LoadErr why there is
	// none.
	Load    lab.LoadResult
	LoadErr error
	// Epoch is when the run's clock started (bucket 0); CPU samples the
	// machine's busy CPU time through the run. Either may be unset.
	Epoch time.Time
	CPU   []lab.CPUSample
}

// NewReport starts the report of plan p on a lab whose congestion control
// is cc: the ceiling (the sum of the rates x 1448/1514) and the fair share
// of the dynamic phase (the same less half of rail 0).
func NewReport(p Plan, cc string) Report {
	var sum float64
	for _, r := range p.Rates {
		sum += r
	}
	return Report{
		CeilingBps: lab.GoodputCeiling(sum), RatesBps: p.Rates,
		DynamicFairBps: lab.GoodputCeiling(sum - p.Rates[0]/2),
		DurationS:      p.Duration.Seconds(), BucketS: Bucket.Seconds(), CC: cc,
		Competitor: p.Competitor, CompetitorNote: p.CompetitorNote,
		Sizes: p.Sizes, Systems: p.Systems, Skipped: append([]Skip{}, p.Skipped...),
		duration: p.Duration,
	}
}

// Note is what the report says about how system was set up.
func Note(system string) string {
	if s, err := Lookup(system); err == nil {
		return s.Note()
	}
	return ""
}

// Add appends a run's two results (static, dynamic) and its series; rerr
// is the run's error, if it failed.
func (rep *Report) Add(run Run, rerr error) {
	st, dy := Phases(rep.duration)
	note := join(run.Note, Note(run.System))
	if run.MPTCP != nil {
		if *run.MPTCP {
			note = join(note, fmt.Sprintf("MPTCP, %d subflows", run.Subflows))
		} else {
			note = join(note, "fell back to TCP")
		}
	}
	for _, ph := range []struct {
		name string
		win  [2]time.Duration
	}{{"static", st}, {"dynamic", dy}} {
		r := Result{System: run.System, Phase: ph.name, Size: run.Size, Window: run.Window, MPTCP: run.MPTCP, Subflows: run.Subflows, Note: note}
		if rerr != nil {
			r.Error = rerr.Error()
		}
		r.GoodputBps = lab.MeanBps(run.Total, Bucket, ph.win[0], ph.win[1])
		if rep.CeilingBps > 0 {
			r.CeilingFraction = r.GoodputBps / rep.CeilingBps
		}
		if run.Rails != nil {
			r.RailsSource = run.RailsSource
			for _, s := range run.Rails {
				r.RailsBps = append(r.RailsBps, lab.MeanBps(s, Bucket, ph.win[0], ph.win[1]))
			}
		}
		if busy, ok := lab.CPUBetween(run.CPU, run.Epoch.Add(ph.win[0]), run.Epoch.Add(ph.win[1])); ok && !run.Epoch.IsZero() && r.GoodputBps > 0 {
			gb := r.GoodputBps / 8 * (ph.win[1] - ph.win[0]).Seconds() / 1e9
			v := busy.Seconds() / gb
			r.CPUsPerGB = &v
		}
		if ph.name == "dynamic" && run.LoadErr == nil && run.Load.Series != nil {
			c := lab.MeanBps(run.Load.Series, run.Load.Bucket, ph.win[0]-rep.duration/2, ph.win[1]-rep.duration/2)
			r.CompetingBps = &c
		}
		rep.Results = append(rep.Results, r)
	}
	s := Series{System: run.System, Size: run.Size, BucketS: Bucket.Seconds()}
	bps := func(b []int64) []float64 {
		out := make([]float64, len(b))
		for i, v := range b {
			out[i] = float64(v) * 8 / Bucket.Seconds()
		}
		return out
	}
	s.Total = bps(run.Total)
	for _, r := range run.Rails {
		s.Rails = append(s.Rails, bps(r))
	}
	s.Competing = bps(run.Load.Series)
	rep.Series = append(rep.Series, s)
}

// WireRails turns cumulative tbf byte counters (n+1 samples, one per
// bucket boundary; wire[k][rail]) into payload bytes per rail and bucket:
// wire bytes x 1448/1514, less the competing stream's payload on rail 0
// (its series starts at half time).
func WireRails(wire [][]uint64, load lab.LoadResult) [][]int64 {
	n, m := len(wire)-1, len(wire[0])
	out := make([][]int64, m)
	for i := range out {
		out[i] = make([]int64, n)
		for k := 0; k < n; k++ {
			out[i][k] = int64(wire[k+1][i]-wire[k][i]) * 1448 / 1514
		}
	}
	off := n - len(load.Series) // the load starts at half time
	for k, v := range load.Series {
		if j := off + k; j >= 0 && j < n {
			out[0][j] = max(out[0][j]-v, 0)
		}
	}
	return out
}

// join joins two notes with "; ".
func join(a, b string) string {
	if a == "" {
		return b
	}
	if b == "" {
		return a
	}
	return a + "; " + b
}
