package labbench

import (
	"fmt"
	"time"

	"github.com/multirail/multirail/lab"
)

// Limits and constants of a bench.
const (
	// Bucket is the receivers' counting interval; Plan.Duration is a
	// multiple of it.
	Bucket      = 250 * time.Millisecond
	MinDuration = 4 * time.Second
	MaxDuration = 10 * time.Minute
	MinSize     = 1 << 10
	MaxSize     = 64 << 20
	// DefaultPrefix is the namespace prefix of the bench's own lab (so
	// that it never touches one that `lab up` built).
	DefaultPrefix = "mrb"
	// PhaseSettle is left out at the start of each phase.
	PhaseSettle = time.Second

	startMargin  = 2 * time.Second // agents start and dial before the epoch
	agentRunCost = 3 * time.Second // estimated overhead of a run, for Estimate
	mpiRunCost   = 5 * time.Second
)

// Plan is validated bench input.
type Plan struct {
	// Rates are the rails' rates in bits per second, fastest first (the
	// competing stream runs on rail 0).
	Rates []float64
	// Sizes are the message sizes, MinSize..MaxSize.
	Sizes []int
	// Systems are the systems to run (see Expand) and Skipped those left
	// out, and why.
	Systems []string
	Skipped []Skip
	// Duration is each run's length: MinDuration..MaxDuration, a multiple
	// of Bucket.
	Duration time.Duration
	// Lab configures the bench's own lab (Rates are taken from the plan).
	Lab lab.Config
	// Competitor is what makes the competing stream on rail0: lab.ToolIperf3
	// (iperf3) or lab.ToolGo (the Go stream of lab.Load); "" is iperf3 when
	// it is on PATH, else the Go stream (see ChooseCompetitor).
	// CompetitorNote says why the competitor is not iperf3 when it fell back
	// ("" otherwise); the report carries it.
	Competitor     string
	CompetitorNote string
}

// ChooseCompetitor resolves p.Competitor: "" becomes iperf3 when it is on
// PATH (lab.Iperf3Available), else the Go stream with a note saying why;
// iperf3 asked for by name when it is missing is an error (wrapping
// lab.ErrNoIperf3), as is an unknown name.
func (p *Plan) ChooseCompetitor() error {
	tool, note, err := lab.ChooseTool(p.Competitor, lab.Iperf3Available())
	if err != nil {
		return fmt.Errorf("lab bench: competing stream: %w", err)
	}
	p.Competitor, p.CompetitorNote = tool, join(p.CompetitorNote, note)
	return nil
}

// Runs is the number of runs: every system at every size.
func (p Plan) Runs() int { return len(p.Systems) * len(p.Sizes) }

// Estimate is about how long the bench runs.
func (p Plan) Estimate() time.Duration {
	var d time.Duration
	for _, s := range p.Systems {
		cost := agentRunCost
		if IsMPI(s) {
			cost = mpiRunCost
		}
		d += p.Duration + cost
	}
	return d*time.Duration(len(p.Sizes)) + 5*time.Second
}

// Phases returns the static and dynamic windows of a run of d: the
// competing stream starts at d/2, and each phase leaves out its first
// PhaseSettle.
func Phases(d time.Duration) (static, dynamic [2]time.Duration) {
	return [2]time.Duration{PhaseSettle, d / 2}, [2]time.Duration{d/2 + PhaseSettle, d}
}
