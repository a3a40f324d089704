package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
	// Baseline, when set, takes turns with the run: the run is cut into
	// slices (5), each followed by as long a slice of the baseline's plain
	// TCP stream, and the round trips into blocks taken in turns with the
	// baseline's; the run's time is its own slices'. Both sides then see
	// the same moods of a shared machine. A run with Loads does not take
	// turns (the loads follow the wall clock); it runs in one piece and
	// leaves the baseline alone.
	Baseline *TCPPath
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
	cfg := multirail.Config{Scheduler: o.Sched, SchedulerOptions: o.SchedOptions, SegmentSize: o.SegmentSize, QueueDepth: o.QueueDepth, DispatchInterval: o.DispatchInterval, Logger: o.Logger,
		MaxMessageSize: max(MaxMessage, int64(o.Size))} // both ends are ours
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
		var rtts []float64
		blocks := 1
		if o.sliced() {
			blocks = rttBlocks
		}
		for b := 0; b < blocks; b++ {
			r, err := pingPong(ctx, cli, srv, rttRounds/blocks)
			if err != nil {
				return res, err
			}
			rtts = append(rtts, r...)
			if o.sliced() {
				if err := o.Baseline.Ping(ctx, rttRounds/blocks); err != nil {
					return res, err
				}
			}
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

// baselineSlices is how many slices a run with Options.Baseline is cut
// into: multirail sends for Duration/baselineSlices, then the baseline for
// as long, and so on.
const baselineSlices = 5

// rttBlocks is how many blocks the round trips of a run with
// Options.Baseline are cut into.
const rttBlocks = 10

// activeClock is multirail's sending time in a run cut into slices: the
// slices so far plus the current one.
type activeClock struct {
	mu    sync.Mutex
	total time.Duration
	since time.Time // start of the current slice; zero between slices
}

func (a *activeClock) begin(t time.Time) {
	a.mu.Lock()
	a.since = t
	a.mu.Unlock()
}

func (a *activeClock) end(t time.Time) {
	a.mu.Lock()
	a.total += t.Sub(a.since)
	a.since = time.Time{}
	a.mu.Unlock()
}

func (a *activeClock) elapsed(now time.Time) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.since.IsZero() {
		return a.total
	}
	return a.total + now.Sub(a.since)
}

// sliced reports whether a run takes turns with its baseline (see
// Options.Baseline).
func (o Options) sliced() bool { return o.Baseline != nil && len(o.Loads) == 0 }

// stream sends msg for o.Duration with o.Window Sends in flight and
// returns the message latencies, the number of messages, the payload
// bytes each rail delivered to the receiver within the run and how long
// the run sent. A run taking turns with its baseline (o.sliced) counts
// every message of its slices and only its own time; otherwise the run
// ends at the deadline: bytes and latencies after it do not count.
func stream(ctx context.Context, cli, srv *multirail.Conn, o Options, msg []byte, start time.Time) ([]float64, int, []uint64, time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slices, sliced := 1, o.sliced()
	if sliced {
		slices = baselineSlices
	}
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
	var (
		sendErr  error
		clock    activeClock
		got      counter // messages received
		sentMsgs int64
	)
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		slice := o.Duration / time.Duration(slices)
		for k := 0; k < slices && ctx.Err() == nil; k++ {
			t0 := time.Now()
			until := deadline
			if sliced {
				until = t0.Add(slice)
			}
			clock.begin(t0)
			n, err := SendWindow(ctx, cli, msg, SendOptions{
				Window: o.Window, Until: until,
				OnStart: func(g int, at time.Time) {
					lg := &logs[g]
					lg.mu.Lock()
					lg.sends = append(lg.sends, at)
					lg.mu.Unlock()
				},
			})
			if sliced {
				// Eager Sends return before their message arrives: the
				// slice ends when the receiver has every message.
				sentMsgs += int64(n)
				if err == nil {
					err = got.waitFor(ctx, sentMsgs)
				}
			}
			clock.end(time.Now())
			if err == nil && sliced {
				err = o.Baseline.Stream(ctx, slice)
			}
			if err != nil {
				if ctx.Err() == nil {
					sendErr = err
				}
				return
			}
		}
	}()
	var (
		lat  []float64
		msgs int
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
			got.add(1)
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
	// The run ends at the deadline, or once the slices are sent.
	var timeout <-chan time.Time
	if !sliced {
		timer := time.NewTimer(time.Until(deadline))
		defer timer.Stop()
		timeout = timer.C
	}
	done := sent
	if !sliced {
		done = nil
	}
	received := func() []uint64 {
		out := make([]uint64, len(base))
		for i, r := range srv.Stats().Rails {
			out[i] = r.BytesReceived - base[i]
		}
		return out
	}
	fail := func(err error) ([]float64, int, []uint64, time.Duration, error) {
		cancel()
		<-sent
		return nil, 0, nil, 0, err
	}
loop:
	for {
		select {
		case <-timeout:
			break loop
		case <-done:
			if sendErr != nil {
				return fail(sendErr)
			}
			if err := ctx.Err(); err != nil {
				return fail(err)
			}
			break loop
		case <-tick.C:
			if o.Progress != nil {
				o.Progress(clock.elapsed(time.Now()), received())
			}
		case err := <-recvDone:
			if err == nil {
				err = io.EOF // the peer closed during the run
			}
			return fail(err)
		case <-ctx.Done():
			return fail(ctx.Err())
		}
	}
	// Every Send of a slice has returned, so the receiver has counted
	// their bytes; in one piece, what arrived by the deadline counts.
	perRail := received()
	elapsed := time.Since(start)
	if sliced {
		elapsed = clock.elapsed(time.Now())
	}
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

// MaxMessage is the MaxMessageSize of the connections the benchmarks open
// (both ends theirs): 1 GiB, the library's default until wire version 4,
// so that windows (and so figures) stay what they were measured with.
const MaxMessage = 1 << 30
