package osu

import (
	"context"
	"errors"
	"fmt"
	"strings"

	stats "github.com/multirail/multirail/internal/measure"

	"github.com/multirail/multirail/comm"
)

// Report is what rank 0 measured, the JSON of `multirail osu --json`.
type Report struct {
	Test     string `json:"test"`
	Ranks    int    `json:"ranks"`
	Launcher string `json:"launcher"`
	Sched    string `json:"sched"`
	// Rails[r] is the number of rails from rank 0 to rank r (0 for
	// itself), RailNames[r] their names and RailBytes[r] the bytes rank 0
	// sent on each.
	Rails     []int      `json:"rails"`
	RailNames [][]string `json:"rail_names"`
	RailBytes [][]uint64 `json:"rail_bytes"`
	Results   []Result   `json:"results"`
	// Stats is rank 0's communicator statistics the rail fields come from.
	Stats comm.Stats `json:"-"`
}

// Result is one size's row.
type Result struct {
	Size int `json:"size"`
	// AvgUs, MinUs and MaxUs are microseconds: for latency the mean and
	// the fastest and slowest single ping-pong (halved); for bw and bibw
	// the time per message and the fastest and slowest window divided by
	// Window; for the collectives min/avg/max over the ranks of each
	// rank's mean.
	AvgUs float64 `json:"avg_us"`
	MinUs float64 `json:"min_us"`
	MaxUs float64 `json:"max_us"`
	// MBs is bw's and bibw's bandwidth in MB/s (10^6 B).
	MBs *float64 `json:"mb_s,omitempty"`
	// BusBWBps is a collective's bus bandwidth in bits/s (nccl-tests').
	BusBWBps   *float64 `json:"busbw_bps,omitempty"`
	Algo       string   `json:"algo,omitempty"`
	Iterations int      `json:"iterations"`
	Warmup     int      `json:"warmup"`
	Validated  bool     `json:"validated"`
}

// measure is one rank's measurement of one size.
type measure struct {
	avg, min, max float64 // microseconds
	bytes         float64 // bw, bibw: payload bytes moved in the timed iterations
	secs          float64 // bw, bibw: their time
	bad           *mismatch
}

// mismatch is the first wrong element a rank found.
type mismatch struct {
	index, iter int
	got, want   string
}

// Tags of the point-to-point tests.
const (
	tagLatency = 1
	tagData    = 2
	tagAck     = 3
)

// ErrValidation is wrapped by a ValidationError.
var ErrValidation = errors.New("osu: validation failed")

// ValidationError is a wrong result found with Plan.Validate.
type ValidationError struct {
	Test string
	Size int
	// Rank is this rank when it found a wrong element (Index, Iteration,
	// Got, Want say which and how), -1 when only others did.
	Rank             int
	Index, Iteration int
	Got, Want        string
	// Ranks name the ranks that found wrong elements, and the first.
	Ranks []string
}

// Error implements error.
func (e *ValidationError) Error() string {
	if e.Rank >= 0 {
		return fmt.Sprintf("osu %s: validation failed on rank %d at size %d: element %d (iteration %d) = %s, want %s",
			e.Test, e.Rank, e.Size, e.Index, e.Iteration, e.Got, e.Want)
	}
	return fmt.Sprintf("osu %s: validation failed at size %d on %s; that rank's error has the values",
		e.Test, e.Size, strings.Join(e.Ranks, ", "))
}

// Unwrap makes errors.Is find the sentinel (and the cause, if any).
func (e *ValidationError) Unwrap() error { return ErrValidation }

// gathered is how many values each rank contributes to combine.
const gathered = 6

// combine gathers every rank's measurement and validation result: on
// rank 0 the row of the table; on every rank an error if any rank found a
// wrong result.
func combine(ctx context.Context, c *comm.Comm, p Plan, size, iters, warmup int, m measure) (Result, error) {
	n := c.Size()
	bad := -1.0
	if m.bad != nil {
		bad = float64(m.bad.index)
	}
	all := make([]float64, gathered*n)
	if err := comm.Allgather(ctx, c, []float64{m.avg, m.min, m.max, m.bytes, m.secs, bad}, all); err != nil {
		return Result{}, fmt.Errorf("osu %s, size %d: gathering the results: %w", p.Test.Name, size, err)
	}
	var badRanks []string
	for r := range n {
		if idx := all[gathered*r+5]; idx >= 0 {
			badRanks = append(badRanks, fmt.Sprintf("rank %d (element %d)", r, int(idx)))
		}
	}
	if len(badRanks) > 0 {
		e := &ValidationError{Test: p.Test.Name, Size: size, Rank: -1, Ranks: badRanks}
		if m.bad != nil {
			e.Rank, e.Index, e.Iteration, e.Got, e.Want = c.Rank(), m.bad.index, m.bad.iter, m.bad.got, m.bad.want
		}
		return Result{}, e
	}
	res := summarize(p.Test, size, n, all)
	res.Iterations, res.Warmup, res.Validated = iters, warmup, p.Validate
	return res, nil
}

// summarize turns every rank's measurement of one size (gathered values
// per rank: avg, min, max, bytes, secs, first bad element) into the row:
// point to point, what rank 0 measured; a collective, min/avg/max over
// the ranks and the bus bandwidth.
func summarize(t *Test, size, n int, all []float64) Result {
	res := Result{Size: size}
	switch t.Kind {
	case Latency, BW, BiBW:
		// Rank 0 measured.
		res.AvgUs, res.MinUs, res.MaxUs = all[0], all[1], all[2]
		if t.Kind != Latency && all[4] > 0 {
			mbs := all[3] / all[4] / 1e6
			res.MBs = &mbs
		}
	default:
		avg := make([]float64, n) // every rank's average
		for r := range n {
			avg[r] = all[gathered*r]
		}
		sum := stats.Summarize(avg)
		res.AvgUs, res.MinUs, res.MaxUs = sum.Mean, sum.Min, sum.Max
		if t.Coll != comm.CollBarrier {
			bus := 0.0
			if res.AvgUs > 0 {
				bus = t.AlgBytes(size, n) * 8 / (res.AvgUs / 1e6) * t.BusFactor(n)
			}
			res.BusBWBps = &bus
		}
	}
	return res
}
