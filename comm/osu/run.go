package osu

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/multirail/multirail/comm"
)

// RunOptions let the caller follow Run.
type RunOptions struct {
	// Begin, when set, is called before the first measurement, once the
	// plan is known to run on this communicator.
	Begin func()
	// Result, when set, gets each size's result as it is measured (on
	// every rank; rank 0's are the report's).
	Result func(Result)
	// Measured, when set, is called once the measurements are over,
	// before the final barrier: from then on the ranks close their
	// connections as they finish, which is no news.
	Measured func()
}

// ErrRanks is wrapped by the error of a point-to-point test run on fewer
// than 2 ranks.
var ErrRanks = errors.New("osu: too few ranks")

// RanksError is a point-to-point test run on fewer than 2 ranks.
type RanksError struct {
	Test  string
	Ranks int
}

// Error implements error.
func (e *RanksError) Error() string {
	return fmt.Sprintf("osu %s needs at least 2 ranks; this job has %d", e.Test, e.Ranks)
}

// Unwrap makes errors.Is find the sentinel (and the cause, if any).
func (e *RanksError) Unwrap() error { return ErrRanks }

// Run runs the plan on rank c.Rank() of an initialised communicator;
// every rank must call it with the same plan. Rank 0 returns the report,
// with the rails and bytes of every peer; the other ranks an incomplete
// one.
func Run(ctx context.Context, c *comm.Comm, p Plan, o RunOptions) (Report, error) {
	var err error
	t := p.Test
	n := c.Size()
	rep := Report{Test: t.Name, Ranks: n, Launcher: c.Launcher(), Results: []Result{}}
	if t.Kind != Coll && n < 2 {
		return rep, &RanksError{Test: t.Name, Ranks: n}
	}
	if o.Begin != nil {
		o.Begin()
	}
	for _, size := range p.Sizes {
		iters, warmup := p.ItersFor(size)
		var m measure
		var algo string
		switch t.Kind {
		case Latency:
			m, err = runLatency(ctx, c, size, iters, warmup, p.Validate)
		case BW:
			m, err = runBW(ctx, c, size, iters, warmup, p.Validate)
		case BiBW:
			m, err = runBiBW(ctx, c, size, iters, warmup, p.Validate)
		default:
			before := collCalls(c, t.Coll)
			m, err = runColl(ctx, c, p, size, iters, warmup)
			algo = usedAlgo(before, collCalls(c, t.Coll))
		}
		if err != nil {
			return rep, fmt.Errorf("osu %s, size %d: %w", t.Name, size, err)
		}
		res, err := combine(ctx, c, p, size, iters, warmup, m)
		if err != nil {
			return rep, err
		}
		res.Algo = algo
		rep.Results = append(rep.Results, res)
		if o.Result != nil {
			o.Result(res)
		}
	}
	// Every rank is done measuring before rank 0 reads the counters and
	// anyone closes.
	if o.Measured != nil {
		o.Measured()
	}
	if err := c.Barrier(ctx); err != nil {
		return rep, fmt.Errorf("osu %s: final barrier: %w", t.Name, err)
	}
	if c.Rank() != 0 {
		return rep, nil
	}
	st := c.Stats()
	rep.Stats = st
	for _, ps := range st.Peers {
		rep.Rails = append(rep.Rails, len(ps.Rails))
		names, bytes := []string{}, []uint64{}
		if ps.Conn != nil {
			for _, rs := range ps.Conn.Rails {
				names = append(names, rs.Name)
				bytes = append(bytes, rs.BytesSent)
			}
			if rep.Sched == "" {
				rep.Sched = ps.Conn.Scheduler.Name
			}
		}
		rep.RailNames = append(rep.RailNames, names)
		rep.RailBytes = append(rep.RailBytes, bytes)
	}
	return rep, nil
}

// collCalls counts the calls of collective cl by algorithm.
func collCalls(c *comm.Comm, cl comm.Collective) map[string]uint64 {
	m := make(map[string]uint64)
	for _, e := range c.Stats().Collectives {
		if e.Collective == cl.String() {
			m[e.Algo] += e.Calls
		}
	}
	return m
}

// usedAlgo names the algorithms whose call counts grew.
func usedAlgo(before, after map[string]uint64) string {
	var used []string
	for a, n := range after {
		if n > before[a] {
			used = append(used, a)
		}
	}
	sort.Strings(used)
	return strings.Join(used, "+")
}

// us is d in microseconds.
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// pairStart begins a point-to-point test: a barrier of every rank, after
// which only ranks 0 and 1 take part (timed).
func pairStart(ctx context.Context, c *comm.Comm) (rank int, timed bool, err error) {
	if err := c.Barrier(ctx); err != nil {
		return 0, false, err
	}
	return c.Rank(), c.Rank() <= 1, nil
}

// timings sums the durations of the timed iterations (after the warmup)
// and keeps their extremes.
type timings struct {
	warmup        int
	total, lo, hi time.Duration
	counted       bool
}

// add records iteration i's duration d, unless i is a warmup iteration.
func (t *timings) add(i int, d time.Duration) {
	if i < t.warmup {
		return
	}
	if !t.counted {
		t.lo, t.hi, t.counted = d, d, true
	}
	t.total += d
	t.lo, t.hi = min(t.lo, d), max(t.hi, d)
}

// set fills m's average, minimum and maximum in microseconds per unit,
// the timed iterations having done n units in all and each per units.
func (t *timings) set(m *measure, n, per int) {
	m.avg = us(t.total) / float64(n)
	m.min, m.max = us(t.lo)/float64(per), us(t.hi)/float64(per)
}

// runLatency is osu_latency: after a barrier, rank 0 sends size bytes
// to rank 1 and waits for size bytes back, warmup+iters times.
func runLatency(ctx context.Context, c *comm.Comm, size, iters, warmup int, validate bool) (measure, error) {
	r, timed, err := pairStart(ctx, c)
	if err != nil || !timed {
		return measure{}, err
	}
	peer := 1 - r
	buf := payload(r, size)
	var m measure
	tm := timings{warmup: warmup}
	for i := range warmup + iters {
		t0 := time.Now()
		var msg comm.Message
		var err error
		if r == 0 {
			if err = c.Send(ctx, peer, tagLatency, buf); err == nil {
				msg, err = c.Recv(ctx, peer, tagLatency)
			}
		} else {
			if msg, err = c.Recv(ctx, peer, tagLatency); err == nil {
				err = c.Send(ctx, peer, tagLatency, buf)
			}
		}
		d := time.Since(t0)
		if err != nil {
			return m, err
		}
		if validate && m.bad == nil {
			m.bad = checkPayload(msg.Data, peer, size, i)
		}
		tm.add(i, d)
	}
	tm.set(&m, 2*iters, 2) // a round trip is two latencies
	return m, nil
}

// runBW is osu_bw: rank 0 posts a window of 64 nonblocking sends of
// size bytes to rank 1, which posts 64 receives and answers the window
// with a 4-byte ack; rank 0 times warmup+iters windows from the first send
// to the ack.
func runBW(ctx context.Context, c *comm.Comm, size, iters, warmup int, validate bool) (measure, error) {
	r, timed, err := pairStart(ctx, c)
	if err != nil || !timed {
		return measure{}, err
	}
	var m measure
	buf := payload(0, size)
	ack := make([]byte, 4)
	reqs := make([]*comm.Request, Window)
	tm := timings{warmup: warmup}
	for i := range warmup + iters {
		t0 := time.Now()
		if r == 0 {
			for j := range reqs {
				reqs[j] = c.Isend(ctx, 1, tagData, buf)
			}
			if err := comm.WaitAll(ctx, reqs...); err != nil {
				return m, err
			}
			if _, err := c.Recv(ctx, 1, tagAck); err != nil {
				return m, err
			}
		} else {
			for j := range reqs {
				reqs[j] = c.Irecv(ctx, 0, tagData)
			}
			if err := comm.WaitAll(ctx, reqs...); err != nil {
				return m, err
			}
			if err := c.Send(ctx, 0, tagAck, ack); err != nil {
				return m, err
			}
			if validate && m.bad == nil {
				m.bad = checkWindow(ctx, reqs, 0, size, i)
			}
		}
		tm.add(i, time.Since(t0))
	}
	tm.set(&m, iters*Window, Window)
	m.bytes = float64(size) * Window * float64(iters)
	m.secs = tm.total.Seconds()
	return m, nil
}

// runBiBW is osu_bibw: ranks 0 and 1 each post a window of 64 receives
// and 64 sends at once and wait for all of them; the bandwidth counts both
// directions.
func runBiBW(ctx context.Context, c *comm.Comm, size, iters, warmup int, validate bool) (measure, error) {
	r, timed, err := pairStart(ctx, c)
	if err != nil || !timed {
		return measure{}, err
	}
	peer := 1 - r
	var m measure
	buf := payload(r, size)
	recvs := make([]*comm.Request, Window)
	sends := make([]*comm.Request, Window)
	tm := timings{warmup: warmup}
	for i := range warmup + iters {
		t0 := time.Now()
		for j := range recvs {
			recvs[j] = c.Irecv(ctx, peer, tagData)
		}
		for j := range sends {
			sends[j] = c.Isend(ctx, peer, tagData, buf)
		}
		if err := comm.WaitAll(ctx, append(slices.Clone(sends), recvs...)...); err != nil {
			return m, err
		}
		d := time.Since(t0)
		if validate && m.bad == nil {
			m.bad = checkWindow(ctx, recvs, peer, size, i)
		}
		tm.add(i, d)
	}
	tm.set(&m, iters*Window, Window)
	m.bytes = 2 * float64(size) * Window * float64(iters)
	m.secs = tm.total.Seconds()
	return m, nil
}

// runColl times one collective: warmup+iters calls, each timed alone,
// a barrier after each; the rank's average over the timed ones.
func runColl(ctx context.Context, c *comm.Comm, p Plan, size, iters, warmup int) (measure, error) {
	var opts []comm.CollOption
	if p.Algo != comm.AlgoAuto {
		opts = append(opts, comm.WithAlgo(p.Algo))
	}
	n, r := c.Size(), c.Rank()
	count := size / 4
	validate := p.Validate
	var m measure
	// prepare runs untimed before each call, op is timed, check runs
	// untimed after it.
	var prepare func()
	var op func() error
	var check func(iter int) *mismatch
	switch p.Test.Coll {
	case comm.CollBarrier:
		op = func() error { return c.Barrier(ctx, opts...) }
	case comm.CollAllreduce:
		in := make([]float32, count)
		for i := range in {
			in[i] = reduceIn(r, i)
		}
		buf := make([]float32, count)
		prepare = func() { copy(buf, in) } // Allreduce works in place
		op = func() error { return comm.Allreduce(ctx, c, buf, comm.Sum, opts...) }
		check = func(iter int) *mismatch {
			for i, v := range buf {
				if w := reduceWant(n, i); v != w {
					return &mismatch{index: i, iter: iter, got: fmt.Sprint(v), want: fmt.Sprint(w)}
				}
			}
			return nil
		}
	case comm.CollReduceScatter:
		send := make([]float32, count)
		for i := range send {
			send[i] = reduceIn(r, i)
		}
		lo, hi := comm.ReduceScatterCounts(count, n, r)
		recv := make([]float32, hi-lo)
		if validate {
			prepare = func() { fill(recv, -1) }
		}
		op = func() error { return comm.ReduceScatter(ctx, c, send, recv, comm.Sum, opts...) }
		check = func(iter int) *mismatch {
			for j, v := range recv {
				if w := reduceWant(n, lo+j); v != w {
					return &mismatch{index: lo + j, iter: iter, got: fmt.Sprint(v), want: fmt.Sprint(w)}
				}
			}
			return nil
		}
	case comm.CollBcast:
		buf := make([]int32, count)
		want := make([]int32, count)
		for i := range want {
			want[i] = value(-2, -2, i)
		}
		if r == 0 {
			copy(buf, want)
		}
		if validate && r != 0 {
			prepare = func() { fill(buf, -1) }
		}
		op = func() error { return comm.Bcast(ctx, c, buf, 0, opts...) }
		check = func(iter int) *mismatch { return firstDiff(buf, want, iter) }
	case comm.CollAllgather:
		send := make([]int32, count)
		for i := range send {
			send[i] = value(r, -1, i)
		}
		recv := make([]int32, n*count)
		want := make([]int32, n*count)
		for s := range n {
			for i := range count {
				want[s*count+i] = value(s, -1, i)
			}
		}
		if validate {
			prepare = func() { fill(recv, -1) }
		}
		op = func() error { return comm.Allgather(ctx, c, send, recv, opts...) }
		check = func(iter int) *mismatch { return firstDiff(recv, want, iter) }
	case comm.CollAlltoall:
		send := make([]int32, n*count)
		want := make([]int32, n*count)
		for j := range n {
			for i := range count {
				send[j*count+i] = value(r, j, i)
				want[j*count+i] = value(j, r, i)
			}
		}
		recv := make([]int32, n*count)
		if validate {
			prepare = func() { fill(recv, -1) }
		}
		op = func() error { return comm.Alltoall(ctx, c, send, recv, opts...) }
		check = func(iter int) *mismatch { return firstDiff(recv, want, iter) }
	default:
		return m, fmt.Errorf("osu: no runner for %s", p.Test.Coll)
	}
	barrier := p.Test.Coll != comm.CollBarrier // a barrier needs no barrier after it
	if err := c.Barrier(ctx); err != nil {
		return m, err
	}
	var total time.Duration
	for i := range warmup + iters {
		if prepare != nil {
			prepare()
		}
		t0 := time.Now()
		err := op()
		d := time.Since(t0)
		if err != nil {
			return m, err
		}
		if i >= warmup {
			total += d
		}
		if validate && check != nil && m.bad == nil {
			m.bad = check(i)
		}
		if barrier {
			if err := c.Barrier(ctx); err != nil {
				return m, err
			}
		}
	}
	m.avg = us(total) / float64(iters)
	m.min, m.max = m.avg, m.avg
	return m, nil
}
