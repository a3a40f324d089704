package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/multirail/multirail/comm"
	"github.com/multirail/multirail/comm/osu"
	"github.com/multirail/multirail/sched"
	"github.com/spf13/cobra"
)

// parseOSUSizes parses --sizes: a comma-separated list whose entries are
// sizes (with units, as parseSize takes them) or MIN:MAX ranges, which
// stand for MIN, 2 MIN, 4 MIN, ... up to MAX (OSU's -m MIN:MAX; every
// power of two from MIN to MAX when MIN is one). The result is sorted and
// without duplicates.
func parseOSUSizes(s string) ([]int, error) {
	var out []int
	entries := strings.Split(s, ",")
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			if len(entries) == 1 {
				return nil, usagef("--sizes %q: want a comma-separated list of sizes or MIN:MAX ranges, e.g. 4:1MiB or 8,1KiB,64KiB", s)
			}
			continue
		}
		lo, hi, isRange := strings.Cut(e, ":")
		a, err := parseSize("sizes", strings.TrimSpace(lo), osu.MinSize, osu.MaxSize)
		if err != nil {
			return nil, err
		}
		if !isRange {
			out = append(out, int(a))
			continue
		}
		b, err := parseSize("sizes", strings.TrimSpace(hi), osu.MinSize, osu.MaxSize)
		if err != nil {
			return nil, err
		}
		if a > b {
			return nil, usagef("--sizes %q: range %s has MIN > MAX; want MIN:MAX with MIN <= MAX", s, e)
		}
		for v := a; v <= b; v *= 2 {
			out = append(out, int(v))
		}
	}
	if len(out) == 0 {
		return nil, usagef("--sizes %q: no sizes; want a comma-separated list of sizes or MIN:MAX ranges, e.g. 4:1MiB", s)
	}
	sort.Ints(out)
	return slices.Compact(out), nil
}

type osuFlags struct {
	sizes, sched, algo string
	iters, warmup      int
	validate, json     bool
	timeout            time.Duration
}

// osuPlan is validated osu input: what to measure, and how to start.
type osuPlan struct {
	osu.Plan
	sched   string
	json    bool
	timeout time.Duration
}

func (f *osuFlags) plan(args []string, sizesSet bool) (osuPlan, error) {
	var p osuPlan
	if len(args) != 1 {
		if len(args) == 0 {
			return p, usagef("osu needs a TEST; allowed: %s", strings.Join(osu.Names(), ", "))
		}
		return p, usagef("osu takes one TEST, got %d arguments %q; allowed: %s", len(args), args, strings.Join(osu.Names(), ", "))
	}
	t, ok := osu.Find(args[0])
	if !ok {
		return p, usagef("osu: unknown test %q; allowed: %s", args[0], strings.Join(osu.Names(), ", "))
	}
	p.Test = t
	spec := f.sizes
	if !sizesSet {
		spec = osu.DefaultCollSizes
		if t.Kind != osu.Coll {
			spec = osu.DefaultP2PSizes
		}
	}
	sizes, err := parseOSUSizes(spec)
	if err != nil {
		return p, err
	}
	switch {
	case t.Coll == comm.CollBarrier && t.Kind == osu.Coll:
		p.Sizes = []int{0}
	case t.Kind == osu.Coll:
		p.Sizes = osu.ElemSizes(sizes)
		if len(p.Sizes) == 0 {
			return p, usagef("--sizes %q: every size is below 4 bytes; osu %s moves 4-byte %s elements", spec, t.Name, t.Elem)
		}
	default:
		p.Sizes = sizes
		if t.Kind != osu.Latency && sizes[len(sizes)-1] > osu.MaxBWSize {
			return p, usagef("--sizes %q: %d bytes is too large for osu %s, which has 64 messages in flight: allowed up to %d (16 MiB)", spec, sizes[len(sizes)-1], t.Name, osu.MaxBWSize)
		}
	}
	if f.iters < 0 || f.iters > osu.MaxIters {
		return p, usagef("--iters %d is out of range: allowed 1..%d, or 0 for the defaults by size", f.iters, osu.MaxIters)
	}
	if f.warmup < 0 || f.warmup > osu.MaxIters {
		return p, usagef("--warmup %d is out of range: allowed 1..%d, or 0 for the defaults by size", f.warmup, osu.MaxIters)
	}
	p.Iters, p.Warmup = f.iters, f.warmup
	if f.sched != "" && !slices.Contains(sched.Names(), f.sched) {
		return p, usagef("--sched %q: unknown scheduler; allowed: %s", f.sched, strings.Join(sched.Names(), ", "))
	}
	p.sched = f.sched
	if f.algo != "" && f.algo != "auto" {
		if t.Kind != osu.Coll {
			return p, usagef("--algo %q: osu %s is point to point; --algo applies to the collective tests", f.algo, t.Name)
		}
		a, err := comm.ParseAlgo(f.algo)
		if err != nil || !slices.Contains(comm.Algorithms(t.Coll), a) {
			return p, usagef("--algo %q: %s has no such algorithm; allowed: %s", f.algo, t.Coll, algoNames(comm.Algorithms(t.Coll)))
		}
		p.Algo = a
	}
	if f.timeout < 0 {
		return p, usagef("--timeout %v: allowed > 0, or 0 for MULTIRAIL_TIMEOUT or comm's default %v", f.timeout, comm.DefaultTimeout)
	}
	p.timeout = f.timeout
	p.Validate, p.json = f.validate, f.json
	return p, nil
}

func algoNames(as []comm.Algo) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}

func newOSU(g *globals) *cobra.Command {
	f := &osuFlags{}
	cmd := &cobra.Command{
		Use:   "osu TEST",
		Short: "OSU-style micro-benchmarks over the communicator: latency, bw, bibw and collectives",
		Long: `osu measures the communicator as the OSU micro-benchmarks measure MPI, so that
its tables can be set beside published ones. Start one process per rank with
any launcher comm.Init detects (multirail run, mpirun, srun, torchrun, env://,
Kubernetes, or MULTIRAIL_RANK/SIZE/RDZV by hand); MULTIRAIL_EMU, MULTIRAIL_IFNAME,
MULTIRAIL_ALGO and MULTIRAIL_TIMEOUT apply as for any comm program.

TEST is one of:
  latency         ranks 0 and 1 ping-pong after a barrier (other ranks wait);
                  latency = time / (2 x iterations); needs >= 2 ranks
  bw              rank 0 sends windows of 64 nonblocking messages to rank 1,
                  which answers each window with a 4-byte ack; MB/s, MB = 10^6 B
  bibw            windows of 64 messages both ways at once
  barrier, bcast, allreduce, allgather, reduce-scatter, alltoall
                  every rank; each iteration timed alone with a barrier
                  between iterations; each rank averages over its iterations,
                  then rank 0 reports min/avg/max over the ranks

Sizes of the collectives, as OSU means them: allreduce and bcast the vector,
reduce-scatter the whole vector (each rank gets 1/n of it), allgather each
rank's contribution, alltoall the block each pair exchanges. Elements are 4
bytes (float32 for allreduce and reduce-scatter, int32 otherwise): sizes are
rounded down to a multiple of 4 and sizes below 4 dropped. Bus bandwidth is
nccl-tests': algbw = S / time with S the whole buffer (n x size for allgather
and alltoall), busbw = algbw x 2(n-1)/n (allreduce), (n-1)/n (allgather,
reduce-scatter, alltoall), 1 (bcast).

Iterations (--iters/--warmup 0): up to 8 KiB OSU's (latency 10000/100,
collectives 1000/100), then 100/10 below 1 MiB and 20/2 from 1 MiB (OSU: 1000/10
and 100/10, too long on slow rails). bw and bibw: 100/10 windows up to 8 KiB,
then enough windows to move about 128 MiB (3..20, plus a tenth to warm up, at
least 1): a 4 MiB bw point moves 3+1 windows of 64 x 4 MiB = 1 GiB, about 25 s
at 350 Mbit/s; the default sizes take under a minute there (bw 1:1MiB on
2 ranks, allreduce 4:1MiB on 4 ranks: about 45 s each).

--validate gives integer-valued inputs whose results are exact and checks every
result against its closed form (allreduce: element i = n(n+1)/2 x (i%7+1)
from inputs (rank+1) x (i%7+1); alltoall: each element a function of source,
destination and index); a mismatch names the rank, size and element and the
command exits 1.

Rank 0 prints OSU's columns (other ranks print nothing on stdout) and, on
stderr, the bytes it sent on each rail to each peer (with the rail's measured
delivery rate and acknowledgement delay once known); --json prints one object
instead: {"test", "ranks", "launcher", "sched", "rails" (rails from rank 0 to
each rank, 0 for itself), "rail_names", "rail_bytes" (bytes rank 0 sent on each
rail to each rank), "results": [{"size", "avg_us", "min_us", "max_us", "mb_s"
(bw, bibw), "busbw_bps" (collectives but barrier), "algo", "iterations",
"warmup", "validated"}]}. For latency min_us/max_us are the fastest and
slowest single ping-pong (halved); for bw and bibw avg_us is the time per
message and min_us/max_us the fastest and slowest window divided by 64.

Exit status: 0, 1 when the bootstrap, a transfer or a validation fails, 2 for
bad input.`,
		Example: `  multirail run -n 4 --emu emu:200mbit,emu:100mbit -- multirail osu allreduce
  MULTIRAIL_RANK=0 MULTIRAIL_SIZE=2 MULTIRAIL_RDZV=file:///tmp/r multirail osu bw --sizes 1MiB &
  MULTIRAIL_RANK=1 MULTIRAIL_SIZE=2 MULTIRAIL_RDZV=file:///tmp/r multirail osu bw --sizes 1MiB`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := f.plan(args, cmd.Flags().Changed("sizes"))
			if err != nil {
				return err
			}
			ctx, stop := labSignals(cmd.Context())
			defer stop()
			return runOSU(ctx, g, p)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.sizes, "sizes", "", "message sizes: comma-separated sizes ("+sizeForm+") or MIN:MAX ranges (MIN, 2 MIN, 4 MIN, ... <= MAX), 1B..64MiB (bw, bibw: 16MiB; barrier: none) (default "+osu.DefaultP2PSizes+" for latency, bw, bibw; "+osu.DefaultCollSizes+" for collectives)")
	fl.IntVar(&f.iters, "iters", 0, "timed iterations per size (0 = by size, see above)")
	fl.IntVar(&f.warmup, "warmup", 0, "untimed warm-up iterations per size (0 = by size, see above)")
	fl.StringVar(&f.sched, "sched", "", "scheduler of every connection: "+strings.Join(sched.Names(), ", ")+" (default MULTIRAIL_SCHED, else the transport's default)")
	fl.StringVar(&f.algo, "algo", "", "force the collective's algorithm (every rank the same), e.g. ring; the test's allowed ones are in the error of a wrong one (default: chosen by size, or MULTIRAIL_ALGO)")
	fl.BoolVar(&f.validate, "validate", false, "check every result against its closed form; exit 1 on a mismatch")
	fl.BoolVar(&f.json, "json", false, "print one JSON object on rank 0 instead of the table")
	fl.DurationVar(&f.timeout, "timeout", 0, fmt.Sprintf("bootstrap timeout (0 = MULTIRAIL_TIMEOUT, else %v)", comm.DefaultTimeout))
	return cmd
}

func runOSU(ctx context.Context, g *globals, p osuPlan) error {
	var finished atomic.Bool
	logger := slog.New(quietEndHandler{g.logger().Handler(), &finished})
	cfg := comm.Config{Timeout: p.timeout, Logger: logger}
	cfg.Transport.Scheduler = p.sched
	c, err := comm.Init(ctx, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	stopMetrics, err := serveCommMetrics(g, c, "")
	if err != nil {
		return err
	}
	defer stopMetrics()
	return osuBench(ctx, c, p, g.stdout, g.stderr, &finished)
}

// osuBench runs the benchmark on rank c.Rank() of an initialised
// communicator; rank 0 writes the report to stdout and the rail summary to
// stderr. It sets finished when the measurements are over.
func osuBench(ctx context.Context, c *comm.Comm, p osuPlan, stdout, stderr io.Writer, finished *atomic.Bool) error {
	root := c.Rank() == 0
	out := io.Discard
	if root && !p.json {
		out = stdout
	}
	rep, err := osu.Run(ctx, c, p.Plan, osu.RunOptions{
		Begin:    func() { printOSUHeader(out, p, c) },
		Result:   func(r osu.Result) { printOSURow(out, p, r) },
		Measured: func() { finished.Store(true) },
	})
	if err == nil && !root && os.Getenv("MULTIRAIL_OSU_SUMMARY") == "all" {
		printRailSummary(stderr, c.Stats()) // every rank's, for a diagnosis
	}
	if err != nil || !root {
		return err
	}
	printRailSummary(stderr, rep.Stats)
	if p.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return nil
}

// quietEndHandler drops the warnings that a peer's connection or rail
// ended once the benchmark is over (finished): the ranks then close in any
// order, and the ones closing last would otherwise warn about each that
// closed first. (A failure of the final barrier is still an error.)
type quietEndHandler struct {
	slog.Handler
	finished *atomic.Bool
}

// closingNoise are the messages quietEndHandler drops.
var closingNoise = []string{
	"comm: connection to a peer ended",                // comm/comm.go
	"rail down; resending its segments on the others", // conn.go: a reset as the peer closes
	"rail down; no rail left",
	// conn.go: the last message of the final barrier, written to a peer
	// that completed the barrier and closed before acknowledging it.
	"closed with eager messages unacknowledged",
}

func (h quietEndHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.finished.Load() && slices.Contains(closingNoise, r.Message) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h quietEndHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return quietEndHandler{h.Handler.WithAttrs(as), h.finished}
}

func (h quietEndHandler) WithGroup(name string) slog.Handler {
	return quietEndHandler{h.Handler.WithGroup(name), h.finished}
}

func printOSUHeader(w io.Writer, p osuPlan, c *comm.Comm) {
	t := p.Test
	fmt.Fprintf(w, "# OSU MPI-style %s Test (multirail)\n", t.Title)
	rails := "-"
	if c.Size() > 1 {
		if st := c.Stats(); len(st.Peers) > 1 {
			rails = fmt.Sprint(len(st.Peers[1].Rails))
		}
	}
	info := fmt.Sprintf("# ranks %d, launcher %s, rails from rank 0 to rank 1: %s", c.Size(), c.Launcher(), rails)
	if t.Elem != "" {
		info += ", datatype " + t.Elem
	}
	if p.Algo != comm.AlgoAuto {
		info += ", algorithm " + p.Algo.String()
	}
	if p.Validate {
		info += ", validated"
	}
	fmt.Fprintln(w, info)
	switch {
	case t.Kind == osu.Latency:
		fmt.Fprintf(w, "%-10s%18s\n", "# Size", "Avg Latency(us)")
	case t.Kind == osu.BW || t.Kind == osu.BiBW:
		fmt.Fprintf(w, "%-10s%18s\n", "# Size", "Bandwidth (MB/s)")
	case t.Coll == comm.CollBarrier:
		fmt.Fprintf(w, "%s%18s%18s%12s  %s\n", "# Avg Latency(us)", "Min Latency(us)", "Max Latency(us)", "Iterations", "Algorithm")
	default:
		fmt.Fprintf(w, "%-10s%18s%18s%18s%12s%18s  %s\n", "# Size", "Avg Latency(us)", "Min Latency(us)", "Max Latency(us)", "Iterations", "Bus BW(Mbit/s)", "Algorithm")
	}
}

func printOSURow(w io.Writer, p osuPlan, r osu.Result) {
	t := p.Test
	switch {
	case t.Kind == osu.Latency:
		fmt.Fprintf(w, "%-10d%18.2f\n", r.Size, r.AvgUs)
	case t.Kind == osu.BW || t.Kind == osu.BiBW:
		mbs := 0.0
		if r.MBs != nil {
			mbs = *r.MBs
		}
		fmt.Fprintf(w, "%-10d%18.2f\n", r.Size, mbs)
	case t.Coll == comm.CollBarrier:
		fmt.Fprintf(w, "%17.2f%18.2f%18.2f%12d  %s\n", r.AvgUs, r.MinUs, r.MaxUs, r.Iterations, r.Algo)
	default:
		bus := 0.0
		if r.BusBWBps != nil {
			bus = *r.BusBWBps / 1e6
		}
		fmt.Fprintf(w, "%-10d%18.2f%18.2f%18.2f%12d%18.1f  %s\n", r.Size, r.AvgUs, r.MinUs, r.MaxUs, r.Iterations, bus, r.Algo)
	}
}

// printRailSummary tells, on stderr, how many bytes rank 0 sent on each
// rail to each peer (every rail of a pair should carry some) and, once
// measured, the rail's delivery rate (timed by the ACKs, and by the
// peer's arrival times), acknowledgement delay and forward delay.
func printRailSummary(w io.Writer, st comm.Stats) {
	fmt.Fprintf(w, "# bytes rank %d sent per rail:\n", st.Rank)
	for _, ps := range st.Peers {
		if ps.Conn == nil {
			continue
		}
		var parts []string
		for _, rs := range ps.Conn.Rails {
			part := fmt.Sprintf("%s %s", rs.Name, osuBytes(rs.BytesSent))
			if rs.RateBps > 0 {
				part += fmt.Sprintf(" (%.1f Mbit/s, by arrivals %.1f, ack %.2f ms, fwd %.2f ms)",
					rs.RateBps/1e6, rs.ArrivalRateBps/1e6, float64(rs.AckDelay)/1e6, float64(rs.ForwardDelay)/1e6)
			}
			if ps.Conn.Scheduler.Explains {
				part += fmt.Sprintf(" [value %.1f us]", -rs.Value*1e6)
			}
			if rs.Errors > 0 || rs.Rejoins > 0 || rs.Resent > 0 {
				part += fmt.Sprintf(" [%d errors, %d rejoins, %d resent: %s]", rs.Errors, rs.Rejoins, rs.Resent, rs.LastError)
			}
			parts = append(parts, part)
		}
		fmt.Fprintf(w, "#   to rank %d (%s, %s): %s\n", ps.Rank, ps.Host, ps.Conn.Scheduler.Name, strings.Join(parts, ", "))
		if pa, msgs := ps.Conn.Path, ps.Conn.MessagesSent+ps.Conn.MessagesReceived; msgs > 0 {
			per := func(n uint64) string { return strconv.FormatFloat(float64(n)/float64(msgs), 'f', 2, 64) }
			fmt.Fprintf(w, "#     per message (%d sent and received): writes %s (bare ACKs %s), seals %s, frames read %s (by the Recv %s), "+
				"Recv hand-offs %s (handed on in place %s, declined %s), poller parks %s, wakes %s, lapses %s, kernel wakes %s\n", msgs, per(pa.Writes), per(pa.BareAcks),
				per(pa.Seals), per(pa.FramesRead), per(pa.DirectReads), per(pa.RecvWaits), per(pa.Handed), per(pa.Declined), per(pa.PollParks), per(pa.PollWakes),
				per(pa.PollLapses), per(pa.KernelWakes))
		}
	}
}

func osuBytes(b uint64) string {
	switch {
	case b >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(b)/1e9)
	case b >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(b)/1e6)
	case b >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(b)/1e3)
	}
	return fmt.Sprintf("%d B", b)
}
