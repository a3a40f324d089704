package sim

import (
	"math"
	"slices"

	"github.com/multirail/multirail/internal/measure"
	"github.com/multirail/multirail/sched"
)

// Result is what one run measured. Rates are bits per second, times
// seconds, sizes bytes. Goodput counts payload; capacity counts what the
// rails offered (wire bytes, after background load).
type Result struct {
	Sched string `json:"sched"`
	// GoodputBps is the payload delivered per second of the run.
	GoodputBps float64 `json:"goodput_bps"`
	// MeanCompletionS, P50CompletionS and P99CompletionS summarise the
	// completion times: from a message's submission by its source to the
	// arrival of its last byte (reqresp: request to response; allreduce:
	// one whole allreduce, end to end). Percentiles are nearest-rank.
	MeanCompletionS float64 `json:"mean_completion_s"`
	P50CompletionS  float64 `json:"p50_completion_s"`
	P99CompletionS  float64 `json:"p99_completion_s"`
	// CompletionUnit is what a completion is: "message", "request" or
	// "allreduce".
	CompletionUnit string `json:"completion_unit"`
	// CapacityBps is the time-averaged rate all rails offered after
	// background load; Efficiency is GoodputBps/CapacityBps.
	CapacityBps float64 `json:"capacity_bps"`
	Efficiency  float64 `json:"efficiency"`
	// DurationS is the virtual length of the run: the scenario's duration,
	// or when finite traffic completed earlier, the time it did.
	DurationS float64 `json:"duration_s"`
	// Completed counts completions; Submitted the messages (requests)
	// the sources submitted. They differ by what was in flight at the end.
	Completed int64 `json:"completed"`
	Submitted int64 `json:"submitted"`
	// OfferedBytes and DeliveredBytes are payload bytes submitted and
	// delivered; SegmentsSent and SegmentsDelivered count segments.
	OfferedBytes      int64  `json:"offered_bytes"`
	DeliveredBytes    int64  `json:"delivered_bytes"`
	SegmentsSent      uint64 `json:"segments_sent"`
	SegmentsDelivered uint64 `json:"segments_delivered"`
	// Events is the number of simulation events run.
	Events uint64 `json:"events"`
	// ForcedPicks counts segments the simulator placed itself because the
	// scheduler declined (Pick returned -1) while nothing was in flight
	// that could change its mind; a correct scheduler has none.
	ForcedPicks uint64 `json:"forced_picks"`
	// Plans counts the messages the planner split over the rails, and
	// MovedSegments the queued segments it moved to a rail that ran dry
	// (scenario plan_min; schedulers that leave large messages to it).
	Plans         uint64 `json:"plans"`
	MovedSegments uint64 `json:"moved_segments"`
	// Rails has one entry per rail (allreduce: per template rail, summed
	// over the ranks; reqresp: the forward rails, then the reverse ones).
	Rails []RailResult `json:"rails"`
	// Series is the payload delivered per rail over time.
	Series Series `json:"series"`
	// CompletionCDF is the distribution of completion times in at most
	// 101 points.
	CompletionCDF []CDFPoint `json:"completion_cdf"`
	// Completions are all completion times in seconds, sorted.
	Completions []float64 `json:"-"`
	// Explanation is the scheduler's view of the first sender's rails at
	// the end, when it explains itself (sched.Explainer); nil otherwise.
	Explanation *Explanation `json:"explanation,omitempty"`
}

// Explanation is a sched.Explanation in the JSON style of the results.
type Explanation struct {
	Levels       []int     `json:"levels"`
	Values       []float64 `json:"values"`
	Decisions    uint64    `json:"decisions"`
	Explorations uint64    `json:"explorations"`
}

// RailResult is one rail's part of a run.
type RailResult struct {
	Name        string  `json:"name"`
	CapacityBps float64 `json:"capacity_bps"`
	GoodputBps  float64 `json:"goodput_bps"`
	// Share is the rail's fraction of all payload delivered.
	Share float64 `json:"share"`
}

// Series is payload bytes delivered per rail in consecutive time bins,
// and the capacity the rail offered in each bin.
type Series struct {
	BinS  float64   `json:"bin_s"`
	Bytes [][]int64 `json:"bytes"` // Bytes[rail][bin]
	// CapacityBytes[rail][bin] is what the rail could carry in the bin
	// after background load (wire bytes).
	CapacityBytes [][]float64 `json:"capacity_bytes"`
}

// CapacityShares returns, per bin, each rail's fraction of the capacity
// offered in the bin: the share an ideal split would give it (NaN for a
// bin with no capacity).
func (s *Series) CapacityShares() [][]float64 { return fractions(s.CapacityBytes) }

// Shares returns, per bin, each rail's fraction of the bytes delivered in
// the bin (NaN for a bin in which nothing was delivered).
func (s *Series) Shares() [][]float64 { return fractions(s.Bytes) }

// fractions returns, per column i, each row's share of the column's sum
// (NaN where the sum is 0); nil for no rows.
func fractions[T int64 | float64](rows [][]T) [][]float64 {
	if len(rows) == 0 {
		return nil
	}
	out := make([][]float64, len(rows))
	n := len(rows[0])
	for r := range out {
		out[r] = make([]float64, n)
	}
	for i := range n {
		var tot T
		for r := range rows {
			tot += rows[r][i]
		}
		for r := range rows {
			out[r][i] = math.NaN()
			if tot > 0 {
				out[r][i] = float64(rows[r][i]) / float64(tot)
			}
		}
	}
	return out
}

// CDFPoint says that Fraction of the completions took at most S seconds.
type CDFPoint struct {
	S        float64 `json:"s"`
	Fraction float64 `json:"fraction"`
}

// Result returns the run's result; it runs nothing, so call it after Run
// or once Step returned false (before, it describes the run so far).
func (s *Sim) Result() *Result {
	if s.over && s.result != nil {
		return s.result
	}
	T := s.endT
	if !s.over {
		T = s.now
	}
	sec := float64(T) / 1e9
	res := &Result{
		Sched: s.schedName, DurationS: sec, Completed: s.completed, Submitted: s.submitted,
		OfferedBytes: s.offered, DeliveredBytes: s.delivered, SegmentsSent: s.segsSent,
		SegmentsDelivered: s.segsArrived, Events: s.events, ForcedPicks: s.forced,
		Plans: s.plans, MovedSegments: s.moved,
		CompletionUnit: "message",
	}
	switch s.sc.Traffic.Kind {
	case KindReqResp:
		res.CompletionUnit = "request"
	case KindAllreduce:
		res.CompletionUnit = "allreduce"
		res.Completed = int64(s.itersDone)
	}
	nbins := int((T + s.bin - 1) / s.bin)
	for _, g := range s.groups {
		nbins = max(nbins, len(g.bins))
	}
	capBins := make([][]float64, len(s.groups))
	for g := range s.groups {
		s.groups[g].capBits = 0
		capBins[g] = make([]float64, nbins)
	}
	for i := range s.rails {
		in := &s.info[i]
		g := s.rails[i].group
		p := newProfile(in.nominal, in.loads, s.sc.Seed, in.stream)
		s.groups[g].capBits += p.capacityBins(T, s.bin, capBins[g])
	}
	for g := range capBins {
		for i := range capBins[g] {
			capBins[g][i] /= 8
		}
	}
	res.Series.CapacityBytes = capBins
	res.Series.BinS = float64(s.bin) / 1e9
	var capBits float64
	for _, g := range s.groups {
		rr := RailResult{Name: g.name}
		if sec > 0 {
			rr.CapacityBps = g.capBits / sec
			rr.GoodputBps = float64(g.arrived) * 8 / sec
		}
		if s.delivered > 0 {
			rr.Share = float64(g.arrived) / float64(s.delivered)
		}
		capBits += g.capBits
		res.Rails = append(res.Rails, rr)
		bins := make([]int64, nbins)
		copy(bins, g.bins)
		res.Series.Bytes = append(res.Series.Bytes, bins)
	}
	if sec > 0 {
		res.GoodputBps = float64(s.delivered) * 8 / sec
		res.CapacityBps = capBits / sec
	}
	if res.CapacityBps > 0 {
		res.Efficiency = res.GoodputBps / res.CapacityBps
	}
	c := make([]float64, len(s.completions))
	for i, d := range s.completions {
		c[i] = float64(d) / 1e9
	}
	slices.Sort(c)
	res.Completions = c
	if n := len(c); n > 0 {
		sum := measure.Summarize(c)
		res.MeanCompletionS = sum.Mean
		res.P50CompletionS = measure.PercentileSorted(c, 0.5)
		res.P99CompletionS = measure.PercentileSorted(c, 0.99)
		k := min(n, 100)
		res.CompletionCDF = append(res.CompletionCDF, CDFPoint{S: sum.Min, Fraction: 1 / float64(n)})
		for i := 1; i <= k; i++ {
			q := float64(i) / float64(k)
			res.CompletionCDF = append(res.CompletionCDF, CDFPoint{S: measure.PercentileSorted(c, q), Fraction: q})
		}
	}
	if len(s.links) > 0 {
		if ex, ok := s.links[0].sch.(sched.Explainer); ok {
			var x sched.Explanation
			ex.Explain(&x)
			res.Explanation = &Explanation{Levels: x.Levels, Values: x.Values, Decisions: x.Decisions, Explorations: x.Explorations}
			for _, v := range x.Values {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					res.Explanation.Values = nil // JSON has no NaN or Inf
					break
				}
			}
		}
	}
	if s.over {
		s.result = res
	}
	return res
}
