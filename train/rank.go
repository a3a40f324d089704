package train

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/multirail/multirail/comm"
	"github.com/multirail/multirail/emu"
	"github.com/multirail/multirail/lossy"
)

// commExchanger is RunRank's exchanger: the communicator's exact Allreduce
// in the reliable mode, its loss-tolerant (transpose) Allreduce in the
// losstolerant mode.
type commExchanger struct {
	c     *comm.Comm
	lossy bool
	cfg   lossy.Config
	// phases, when set, pins the rate by phase of the emulated load
	// (Options.PhaseRates) counted from start.
	phases *PhaseRates
	load   emu.Pattern
	start  time.Time
}

func (x commExchanger) Allreduce(ctx context.Context, g []float32) error {
	if x.lossy {
		if x.phases != nil {
			r := x.phases.Congested
			if x.load.InCalm(time.Since(x.start)) {
				r = x.phases.Calm
			}
			if err := x.c.SetFixedRate(r); err != nil {
				return err
			}
		}
		return comm.Allreduce(ctx, x.c, g, comm.Mean, comm.LossTolerant(x.cfg))
	}
	return comm.Allreduce(ctx, x.c, g, comm.Mean)
}

func (x commExchanger) ReportQuality(ctx context.Context, q float64) error {
	if !x.lossy {
		return nil
	}
	return x.c.ReportQuality(ctx, q)
}

func (x commExchanger) Sync(ctx context.Context, buf []float32) error {
	return comm.Allreduce(ctx, x.c, buf, comm.Mean)
}

func (x commExchanger) Counts() (uint64, uint64, bool) {
	if !x.lossy {
		return 0, 0, true
	}
	st := x.c.LossyStats()
	return st.PacketsDropped, st.PacketsSent, true
}

// RunRank runs this process's worker of a data-parallel training in which
// every rank of c is one worker (one process per worker, started by a
// launcher; see comm.Init). Options are as for Run, except that Workers is
// c.Size() (0 or that value), the network is c's (Rails, Congestion and
// the in-process topology do not apply: the launcher's rails, e.g.
// `multirail run --emu`, do) and the discard controller is c's
// (comm.Config.Stage); Discard and DiscardRate are ignored here. The
// reliable mode uses the communicator's exact Allreduce, the losstolerant
// mode its loss-tolerant one (the transpose allreduce). Every rank must
// call RunRank with the same Options. Rank 0 returns the full results
// (accuracy curve, time to target, per-step discard rates of all ranks);
// the other ranks return theirs without the curve.
func RunRank(ctx context.Context, c *comm.Comm, o Options) ([]Result, error) {
	if o.Workers != 0 && o.Workers != c.Size() {
		return nil, fmt.Errorf("%w: Workers = %d but the communicator has %d ranks", ErrConfig, o.Workers, c.Size())
	}
	o.Workers = c.Size()
	if o.Workers < 2 {
		return nil, fmt.Errorf("%w: %d rank(s); allowed 2..16 (start one process per worker with a launcher)", ErrConfig, o.Workers)
	}
	o, err := o.prepare()
	if err != nil {
		return nil, err
	}
	if !o.PhaseRates.IsZero() && c.EmuLoad().Kind != emu.PatternPhases {
		return nil, fmt.Errorf("%w: PhaseRates needs a phases load on the emulated rails (comm.Config.EmuLoad = %q)", ErrConfig, c.EmuLoad().String())
	}
	var out []Result
	for _, m := range o.Modes {
		r, err := runRankMode(ctx, c, o, m)
		if err != nil {
			return out, fmt.Errorf("train: rank %d: mode %s: %w", c.Rank(), m, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func runRankMode(ctx context.Context, c *comm.Comm, o Options, mode Mode) (Result, error) {
	N, rank := o.Workers, c.Rank()
	m, err := o.newModel(rand.New(rand.NewPCG(o.Seed, 0x6d6c70)))
	if err != nil {
		return Result{}, err
	}
	parts, err := o.parts()
	if err != nil {
		return Result{}, err
	}
	dropped, total := make([][]uint64, o.Steps), make([][]uint64, o.Steps)
	for s := range o.Steps {
		dropped[s], total[s] = make([]uint64, N), make([]uint64, N)
	}
	losses := make([]float64, o.Steps)
	// Every rank starts the clock after the same barrier.
	if err := c.Barrier(ctx); err != nil {
		return Result{}, err
	}
	// Both modes see the same background-load schedule from their start.
	c.RestartEmuLoad()
	start := time.Now()
	ex := commExchanger{c: c, lossy: mode == LossTolerant, cfg: lossy.Config{PacketFloats: o.PacketFloats, Mean: true, ErrorFeedback: o.ErrorFeedback}}
	if !o.PhaseRates.IsZero() {
		ex.phases, ex.load, ex.start = &o.PhaseRates, c.EmuLoad(), start
	}
	w := worker{o: o, mode: mode, rank: rank, m: m, part: parts[rank],
		ex:     ex,
		losses: losses, dropped: dropped, total: total, start: start,
		record: rank == 0 || mode == LossTolerant}
	if load := c.EmuLoad(); load.Kind == emu.PatternPhases {
		w.calm, w.load = make([]bool, o.Steps), load
		w.durs = make([]float64, o.Steps)
	}
	if err := w.run(ctx); err != nil {
		return Result{}, err
	}
	elapsed := time.Since(start)
	res := Result{Mode: mode, TargetAccuracy: o.Target, Steps: o.Steps, Wall: elapsed.Seconds(),
		MeanStep: elapsed.Seconds() / float64(o.Steps), Losses: losses, DiscardRates: make([]float64, o.Steps)}
	// Per-step discard rates over all ranks: every rank filled its own
	// column.
	counts := make([]float64, 2*o.Steps)
	for s := range o.Steps {
		counts[2*s], counts[2*s+1] = float64(dropped[s][rank]), float64(total[s][rank])
	}
	if err := comm.Allreduce(ctx, c, counts, comm.Sum); err != nil {
		return res, err
	}
	var d, t float64
	for s := range o.Steps {
		if counts[2*s+1] > 0 {
			res.DiscardRates[s] = counts[2*s] / counts[2*s+1]
		}
		d, t = d+counts[2*s], t+counts[2*s+1]
	}
	if t > 0 {
		res.MeanDiscardRate = d / t
	}
	if w.calm != nil {
		// By this rank's clock (rank 0's in what it reports).
		res.PhaseDiscard = phaseDiscard(w.calm, w.durs, func(s int) (float64, float64) { return counts[2*s], counts[2*s+1] })
	}
	// How far the replicas drifted: each rank's largest difference from
	// rank 0's parameters, the largest over the ranks.
	p0 := m.Params()
	if err := comm.Bcast(ctx, c, p0, 0); err != nil {
		return res, err
	}
	spread := []float64{0}
	for k, v := range m.Params() {
		spread[0] = math.Max(spread[0], math.Abs(v-p0[k]))
	}
	if err := comm.Allreduce(ctx, c, spread, comm.Max); err != nil {
		return res, err
	}
	res.ReplicaSpread = spread[0]
	if mode == LossTolerant {
		// The replicas differ: rank 0 evaluates their average.
		if err := averageSnapshots(ctx, c, w.snaps); err != nil {
			return res, err
		}
	}
	if rank == 0 {
		if err := res.evaluate(m, w.snaps, *o.Test, o.Targets, o.EvalEvery); err != nil {
			return res, err
		}
	}
	return res, nil
}

// averageSnapshots replaces rank 0's snapshots by the mean of every
// rank's (the same checkpoints on every rank), a few MiB per exact
// allreduce, after the run.
func averageSnapshots(ctx context.Context, c *comm.Comm, snaps []snapshot) error {
	if len(snaps) == 0 {
		return nil
	}
	per := max(1, (4<<20)/(4*max(1, len(snaps[0].params))))
	var buf []float32
	for k := 0; k < len(snaps); k += per {
		group := snaps[k:min(k+per, len(snaps))]
		buf = buf[:0]
		for _, sn := range group {
			buf = append(buf, sn.params...)
		}
		if err := comm.Allreduce(ctx, c, buf, comm.Mean); err != nil {
			return fmt.Errorf("averaging the replicas' checkpoints: %w", err)
		}
		for i, sn := range group {
			copy(sn.params, buf[i*len(sn.params):])
		}
	}
	return nil
}
