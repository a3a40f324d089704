package sched

import (
	"fmt"
	"math"
)

// NameWeighted is the registry name of the weighted scheduler.
const NameWeighted = "weighted"

func init() {
	Register(NameWeighted, newWeighted)
}

// weighted gives each up rail a share of the bytes proportional to its
// configured bandwidth (Open MPI's hand-tuned btl_tcp_bandwidth_* split).
//
// It is a smooth weighted round-robin over bytes: on every Pick each up rail
// earns size*w_i/W credit (W the sum of the up rails' weights), the rail
// with the most credit (lowest index on ties) is picked and pays size. The
// credits of up rails stay bounded, so the byte share of each rail converges
// to w_i/W, and the picks of the rails are interleaved rather than bursty.
// A rail that is not up earns nothing and its credit is cleared, so the
// shares renormalise among the rails that are up. The rail whose turn it is
// is returned even when full: the split is static.
type weighted struct {
	w      []float64 // configured bandwidth per rail, scaled to (0, 1]
	credit []float64 // byte credit per rail
}

func newWeighted(cfg Config) (Scheduler, error) {
	if err := noOptions(NameWeighted, cfg); err != nil {
		return nil, err
	}
	if len(cfg.Bandwidths) != cfg.Rails {
		return nil, fmt.Errorf("%w: weighted: len(Bandwidths) = %d, need Rails = %d entries",
			ErrConfig, len(cfg.Bandwidths), cfg.Rails)
	}
	for i, b := range cfg.Bandwidths {
		if !(b > 0) || math.IsInf(b, 0) {
			return nil, fmt.Errorf("%w: weighted: Bandwidths[%d] = %v, need a finite value > 0 (bits per second)",
				ErrConfig, i, b)
		}
	}
	// Scale the weights to (0, 1] so that their sum cannot overflow.
	top := 0.0
	for _, b := range cfg.Bandwidths {
		top = max(top, b)
	}
	w := make([]float64, cfg.Rails)
	for i, b := range cfg.Bandwidths {
		w[i] = b / top
	}
	return &weighted{w: w, credit: make([]float64, cfg.Rails)}, nil
}

func (s *weighted) Name() string { return NameWeighted }

// Pick considers rails 0..min(len(rails), Config.Rails)-1.
func (s *weighted) Pick(now int64, size int, rails []RailState) int {
	n := min(len(rails), len(s.w))
	var total float64
	for i := range n {
		if rails[i].Up {
			total += s.w[i]
		} else {
			s.credit[i] = 0
		}
	}
	if total == 0 {
		return -1
	}
	b := float64(max(size, 1)) // a turn is taken even for an empty segment
	k := b / total
	best := -1
	for i := range n {
		if !rails[i].Up {
			continue
		}
		s.credit[i] += k * s.w[i]
		if best < 0 || s.credit[i] > s.credit[best] {
			best = i
		}
	}
	s.credit[best] -= b
	return best
}

func (s *weighted) Departed(now int64, rail int, size int, waited int64, rails []RailState) {}
