package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/emu"
	"github.com/multirail/multirail/internal/measure"
	"github.com/multirail/multirail/internal/topo"
)

// Options describe one measurement.
type Options struct {
	Rails []emu.Spec
	Sched string
	// SchedOptions is multirail.Config.SchedulerOptions for both ends.
	SchedOptions string
	Size         int
	Duration     time.Duration
	Loads        []emu.Load
	SegmentSize  int
	QueueDepth   int
	// Window is the number of Sends kept in flight (each on its own tag);
	// 0 means AutoWindow(Size).
	Window int
	// DispatchInterval is multirail.Config.DispatchInterval for both ends:
	// 0 drains the rails' queues continuously, 10ms..1s on a timer.
	DispatchInterval time.Duration
	// RTT also measures the 1-byte round trip after the goodput run.
	RTT bool
	// Progress, when set, is called about every 100 ms with the elapsed
	// time and the payload bytes received so far on each rail.
	Progress func(elapsed time.Duration, perRail []uint64)
	Logger   *slog.Logger
}

// RailResult is one rail's share of a run.
type RailResult struct {
	Name        string  `json:"name"`
	CapacityBps float64 `json:"capacity_bps"`
	GoodputBps  float64 `json:"goodput_bps"`
	// Level and Value are the sender's scheduler state for the rail at the
	// end of the run (multirail.RailStats.Level and Value); nil, and left
	// out of the JSON, when the scheduler does not explain itself.
	Level *int     `json:"level,omitempty"`
	Value *float64 `json:"value,omitempty"`
	// RecentShare is the rail's share of the sender's last
	// multirail.RecentChoices rail choices at the end of the run; nil
	// (left out) where no sender's statistics are at hand.
	RecentShare *float64 `json:"recent_share,omitempty"`
}

// Result is one scheduler's run, in the JSON shape of the CLI contract.
// LatencyP50, LatencyP99 and RTTP50 are nearest-rank percentiles
// (measure.Percentile) of the message latencies and 1-byte round trips.
type Result struct {
	Sched       string       `json:"sched"`
	Size        int          `json:"size"`
	DurationS   float64      `json:"duration_s"`
	Messages    int          `json:"messages"`
	GoodputBps  float64      `json:"goodput_bps"`
	CapacityBps float64      `json:"capacity_bps"`
	Efficiency  float64      `json:"efficiency"`
	Rails       []RailResult `json:"rails"`
	LatencyP50  float64      `json:"latency_p50_s"`
	LatencyP99  float64      `json:"latency_p99_s"`
	RTTP50      float64      `json:"rtt_p50_s,omitempty"`
	// DispatchS is the sender's dispatch timer interval in seconds; 0
	// means continuous dispatch.
	DispatchS float64 `json:"dispatch_s"`
	// Decisions, Explorations and RecentChoices come from the sender's
	// multirail.Stats.Scheduler at the end of the run: the scheduler's
	// decisions, those that explored, and the last rails it chose
	// (oldest first).
	Decisions     uint64 `json:"decisions"`
	Explorations  uint64 `json:"explorations"`
	RecentChoices []int  `json:"recent_choices"`
}

// AddSchedulerStats copies what st says about the sender's scheduler into
// r: Decisions, Explorations, RecentChoices, and per rail the state level
// and value (when known) and the share of the recent choices. r.Rails must
// have one entry per rail of st, in the same order.
func (r *Result) AddSchedulerStats(st multirail.Stats) {
	r.Decisions = st.Scheduler.Decisions
	r.Explorations = st.Scheduler.Explorations
	r.RecentChoices = append([]int{}, st.Scheduler.Recent...)
	for i := range r.Rails {
		if i >= len(st.Rails) {
			break
		}
		rs := st.Rails[i]
		share := rs.RecentShare
		r.Rails[i].RecentShare = &share
		if st.Scheduler.Explains && rs.Level >= 0 {
			level, value := rs.Level, rs.Value
			r.Rails[i].Level, r.Rails[i].Value = &level, &value
		}
	}
}

// Baseline is a plain TCP stream over the same kind of path.
type Baseline struct {
	GoodputBps float64 `json:"goodput_bps"`
	// LatencyP50 is the 1-byte round trip of plain TCP (compare with
	// Result.RTTP50).
	LatencyP50 float64 `json:"latency_p50_s"`
}

// NeedsNominal reports whether scheduler sched is given the rails'
// nominal rates (multirail.Rail.Bandwidth): only weighted, which cannot
// work without them. The others could read them too (shortestqueue and
// qlearn-patent do, when given), but a transport in the field seldom knows
// them, so giving them out would flatter those schedulers.
func NeedsNominal(sched string) bool { return sched == "weighted" }

// AutoWindow is the default number of Sends in flight for messages of
// size bytes: about 8 MiB in flight, at least 4 and at most 256 (like the
// message windows of osu_bw-style MPI benchmarks).
func AutoWindow(size int) int { return max(4, min(256, (8<<20)/max(size, 1))) }

// Run measures one scheduler.
func Run(ctx context.Context, o Options) (Result, error) {
	if o.Window <= 0 {
		o.Window = AutoWindow(o.Size)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg := multirail.Config{Scheduler: o.Sched, SchedulerOptions: o.SchedOptions, SegmentSize: o.SegmentSize, QueueDepth: o.QueueDepth, DispatchInterval: o.DispatchInterval, Logger: o.Logger}
	top, err := topo.NewPair(ctx, pairConfig(o, cfg))
	if err != nil {
		return Result{}, err
	}
	defer top.Close()
	cli, srv := top.Dialer, top.Acceptor

	res := Result{Sched: cli.Stats().Scheduler.Name, Size: o.Size, DispatchS: o.DispatchInterval.Seconds()}
	// One read-only buffer for every sender, as the plain TCP baseline
	// writes from one buffer: Send only reads it. It is filled before the
	// clock starts (filling 64 MiB takes a few hundred ms here, and the
	// baseline's buffer is made before its clock starts too).
	msg := Payload(o.Size)
	start := time.Now()
	for _, l := range top.Links {
		if l != nil {
			l.SetEpoch(start)
		}
	}
	lat, msgs, perRail, elapsed, err := stream(ctx, cli, srv, o, msg, start)
	if err != nil {
		return res, err
	}
	res.DurationS = elapsed.Seconds()
	res.Messages = msgs
	end := start.Add(elapsed)
	for i, l := range top.Links {
		rr := RailResult{Name: top.Rails[i].Name, GoodputBps: float64(perRail[i]) * 8 / elapsed.Seconds()}
		if l != nil {
			rr.CapacityBps = l.Capacity(start, end)
		}
		res.Rails = append(res.Rails, rr)
		res.GoodputBps += rr.GoodputBps
		res.CapacityBps += rr.CapacityBps
	}
	if res.CapacityBps > 0 {
		res.Efficiency = res.GoodputBps / res.CapacityBps
	}
	res.LatencyP50, res.LatencyP99 = measure.Percentile(lat, 0.50), measure.Percentile(lat, 0.99)
	res.AddSchedulerStats(cli.Stats()) // before the round trips add choices of their own
	if o.RTT {
		rtts, err := pingPong(ctx, cli, srv, 2000)
		if err != nil {
			return res, err
		}
		res.RTTP50 = measure.Percentile(rtts, 0.5)
	}
	return res, nil
}

// pairConfig is the topology of a run: o.Rails with o.Loads, the rails'
// nominal rates given only to a scheduler that needs them.
func pairConfig(o Options, cfg multirail.Config) topo.PairConfig {
	return topo.PairConfig{
		Rails: o.Rails, Config: cfg, Nominal: NeedsNominal(o.Sched),
		Loads: func(rail int) []emu.Load { return emu.RailLoads(o.Loads, rail) },
	}
}

// stream sends msg for o.Duration with o.Window Sends in
// flight and returns the message latencies, the number of messages and the
// payload bytes each rail delivered to the receiver within the run.
func stream(ctx context.Context, cli, srv *multirail.Conn, o Options, msg []byte, start time.Time) ([]float64, int, []uint64, time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	deadline := start.Add(o.Duration)
	type tagLog struct {
		mu    sync.Mutex
		sends []time.Time
	}
	logs := make([]tagLog, o.Window)
	base := make([]uint64, len(srv.Stats().Rails))
	for i, r := range srv.Stats().Rails {
		base[i] = r.BytesReceived
	}
	var sendErr error
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		_, err := SendWindow(ctx, cli, msg, SendOptions{
			Window: o.Window, Until: deadline,
			OnStart: func(g int, at time.Time) {
				lg := &logs[g]
				lg.mu.Lock()
				lg.sends = append(lg.sends, at)
				lg.mu.Unlock()
			},
		})
		if err != nil && ctx.Err() == nil {
			sendErr = err
		}
	}()
	var (
		lat     []float64
		msgs    int
		perRail []uint64
		elapsed time.Duration
	)
	recvDone := make(chan error, 1)
	snap := make(chan struct{})
	go func() {
		next := make([]int, o.Window)
		recvDone <- Receive(ctx, srv, func(m multirail.Message, now time.Time) error {
			g := int(m.Tag)
			if g < 0 || g >= o.Window || len(m.Data) != o.Size {
				return fmt.Errorf("bench: unexpected message tag %d, %d bytes", m.Tag, len(m.Data))
			}
			lg := &logs[g]
			lg.mu.Lock()
			began := lg.sends[next[g]]
			lg.mu.Unlock()
			next[g]++
			select {
			case <-snap:
			default:
				lat = append(lat, now.Sub(began).Seconds())
				msgs++
			}
			return nil
		})
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	received := func() []uint64 {
		out := make([]uint64, len(base))
		for i, r := range srv.Stats().Rails {
			out[i] = r.BytesReceived - base[i]
		}
		return out
	}
loop:
	for {
		select {
		case <-timer.C:
			break loop
		case <-tick.C:
			if o.Progress != nil {
				o.Progress(time.Since(start), received())
			}
		case err := <-recvDone:
			if err == nil {
				err = io.EOF // the peer closed during the run
			}
			cancel()
			<-sent
			return nil, 0, nil, 0, err
		case <-ctx.Done():
			<-sent
			return nil, 0, nil, 0, ctx.Err()
		}
	}
	perRail = received()
	elapsed = time.Since(start)
	close(snap)
	<-sent // senders stop at the deadline; their last Sends complete
	cancel()
	if err := <-recvDone; err != nil && !errors.Is(err, context.Canceled) {
		return nil, 0, nil, 0, err
	}
	if sendErr != nil {
		return nil, 0, nil, 0, sendErr
	}
	if o.Progress != nil {
		o.Progress(elapsed, perRail)
	}
	return lat, msgs, perRail, elapsed, nil
}

// pingPong measures n round trips of a 1-byte message.
func pingPong(ctx context.Context, a, b *multirail.Conn, n int) ([]float64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	echo := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			m, err := b.Recv(ctx)
			if err != nil {
				echo <- err
				return
			}
			if err := b.Send(ctx, m.Tag, m.Data); err != nil {
				echo <- err
				return
			}
			b.Release(m.Data) // the 1-byte Send is eager: it copied the data
		}
		echo <- nil
	}()
	out := make([]float64, 0, n)
	ping := []byte{1}
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if err := a.Send(ctx, 0, ping); err != nil {
			return nil, err
		}
		m, err := a.Recv(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, time.Since(t0).Seconds())
		a.Release(m.Data)
	}
	return out, <-echo
}

// TCPBaseline measures one plain TCP stream over a path like spec (an
// emulated link for emu:, loopback for loop) with size-byte writes for
// duration, then the 1-byte round trip.
func TCPBaseline(ctx context.Context, spec emu.Spec, size int, duration time.Duration) (Baseline, error) {
	var b Baseline
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return b, err
	}
	defer ln.Close()
	addrs, links, err := topo.Links(ln.Addr().String(), []emu.Spec{spec}, nil, nil)
	if err != nil {
		return b, err
	}
	addr := addrs[0]
	if links[0] != nil {
		defer links[0].Close()
	}
	type acc struct {
		c   net.Conn
		err error
	}
	accc := make(chan acc, 1)
	go func() { c, err := ln.Accept(); accc <- acc{c, err} }()
	cc, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return b, err
	}
	defer cc.Close()
	a := <-accc
	if a.err != nil {
		return b, a.err
	}
	sc := a.c
	defer sc.Close()

	// Goodput: the receiver counts bytes over the run.
	counted := make(chan int64, 1)
	var start time.Time
	startc := make(chan time.Time, 1)
	go func() {
		buf := make([]byte, max(size, 256<<10))
		var n int64
		st := <-startc
		dl := st.Add(duration)
		for {
			k, err := sc.Read(buf)
			if time.Now().Before(dl) {
				n += int64(k)
			}
			if err != nil {
				counted <- n
				return
			}
		}
	}()
	msg := make([]byte, size)
	start = time.Now()
	startc <- start
	deadline := start.Add(duration)
	for time.Now().Before(deadline) {
		if _, err := cc.Write(msg); err != nil {
			return b, err
		}
	}
	el := time.Since(start)
	_ = cc.(*net.TCPConn).CloseWrite()
	n := <-counted
	b.GoodputBps = float64(n) * 8 / min(el, duration).Seconds()

	// 1-byte round trip on a fresh pair of connections.
	go func() { c, err := ln.Accept(); accc <- acc{c, err} }()
	pc, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return b, err
	}
	defer pc.Close()
	a = <-accc
	if a.err != nil {
		return b, a.err
	}
	defer a.c.Close()
	go func() {
		var one [1]byte
		for {
			if _, err := io.ReadFull(a.c, one[:]); err != nil {
				return
			}
			if _, err := a.c.Write(one[:]); err != nil {
				return
			}
		}
	}()
	rtts := make([]float64, 0, 2000)
	var one [1]byte
	for i := 0; i < 2000; i++ {
		t0 := time.Now()
		if _, err := pc.Write(one[:]); err != nil {
			return b, err
		}
		if _, err := io.ReadFull(pc, one[:]); err != nil {
			return b, err
		}
		rtts = append(rtts, time.Since(t0).Seconds())
	}
	b.LatencyP50 = measure.Percentile(rtts, 0.5)
	return b, nil
}
