package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/multirail/multirail/comm"
	"github.com/multirail/multirail/sched"
	"github.com/spf13/cobra"
)

// The OSU micro-benchmarks' method (osu_latency, osu_bw, osu_bibw and the
// collective tests), run over a communicator: one rank per process, under
// whatever launcher started the processes (comm.Init detects it).

// osuKind is how a test measures.
type osuKind int

const (
	osuLatency osuKind = iota // ping-pong between ranks 0 and 1
	osuBW                     // rank 0 -> rank 1, windows of nonblocking sends
	osuBiBW                   // both directions at once
	osuColl                   // a collective, every rank
)

// osuTest is one test the command offers.
type osuTest struct {
	name  string // the CLI name
	title string // OSU's name for it, in the header line
	kind  osuKind
	coll  comm.Collective // osuColl only
	elem  string          // element type of a collective: "float32" or "int32"
}

var osuTests = []osuTest{
	{name: "latency", title: "Latency", kind: osuLatency},
	{name: "bw", title: "Bandwidth", kind: osuBW},
	{name: "bibw", title: "Bi-Directional Bandwidth", kind: osuBiBW},
	{name: "barrier", title: "Barrier Latency", kind: osuColl, coll: comm.CollBarrier},
	{name: "bcast", title: "Broadcast Latency", kind: osuColl, coll: comm.CollBcast, elem: "int32"},
	{name: "allreduce", title: "Allreduce Latency", kind: osuColl, coll: comm.CollAllreduce, elem: "float32"},
	{name: "allgather", title: "Allgather Latency", kind: osuColl, coll: comm.CollAllgather, elem: "int32"},
	{name: "reduce-scatter", title: "Reduce_scatter Latency", kind: osuColl, coll: comm.CollReduceScatter, elem: "float32"},
	{name: "alltoall", title: "All-to-All Personalized Exchange Latency", kind: osuColl, coll: comm.CollAlltoall, elem: "int32"},
}

func osuTestNames() []string {
	names := make([]string, len(osuTests))
	for i, t := range osuTests {
		names[i] = t.name
	}
	return names
}

func findOSUTest(name string) (*osuTest, bool) {
	for i := range osuTests {
		if osuTests[i].name == name {
			return &osuTests[i], true
		}
	}
	return nil, false
}

// busFactor is nccl-tests' bus-bandwidth factor for a collective of n
// ranks (0 for the barrier, which moves no data).
func (t *osuTest) busFactor(n int) float64 {
	if n < 1 {
		return 0
	}
	f := float64(n-1) / float64(n)
	switch t.coll {
	case comm.CollAllreduce:
		return 2 * f
	case comm.CollAllgather, comm.CollReduceScatter, comm.CollAlltoall:
		return f
	case comm.CollBcast:
		return 1
	}
	return 0
}

// algBytes is the message size nccl-tests divides by the time for its
// algorithm bandwidth, given the OSU size (per rank for allgather, per pair
// for alltoall, the whole vector otherwise): nccl-tests' size is the whole
// buffer, n blocks for allgather and alltoall.
func (t *osuTest) algBytes(size, n int) float64 {
	switch t.coll {
	case comm.CollAllgather, comm.CollAlltoall:
		return float64(size) * float64(n)
	}
	return float64(size)
}

// The limits and defaults of the flags.
const (
	osuMinSize     = 1
	osuMaxSize     = 64 << 20
	osuMaxBWSize   = 16 << 20  // bw, bibw: 64 of them in flight
	osuWindow      = 64        // messages in flight per bw/bibw iteration (OSU's window)
	osuBWBudget    = 128 << 20 // bytes one large bw point aims to move (iterations x window x size)
	osuSmall       = 8 << 10   // OSU's large-message threshold: above it, fewer iterations
	osuLarge       = 1 << 20   // from here on, fewer still
	osuDefaultP2P  = "1:1MiB"
	osuDefaultColl = "4:1MiB"
	osuMaxIters    = 1_000_000
)

// osuDefaultIters returns the iterations and warm-up iterations of a
// point of size bytes when --iters and --warmup are 0, shrinking with the
// size as OSU's do: 1000/100 up to 8 KiB, 100/10 below 1 MiB, 20/2 from
// 1 MiB (latency and collectives). bw and bibw run 100/10 windows up to 8
// KiB, then as many windows of 64 messages as move about 128 MiB, at
// least 3 and at most 20 (OSU's large-message count), plus a tenth of that
// (at least 1) to warm up: a 4 MiB point moves 3+1 windows of 64 x 4 MiB,
// 1 GiB, about 25 s at 350 Mbit/s.
func osuDefaultIters(kind osuKind, size int) (iters, warmup int) {
	switch kind {
	case osuBW, osuBiBW:
		if size <= osuSmall {
			return 100, 10
		}
		iters = min(max(osuBWBudget/(osuWindow*size), 3), 20)
		return iters, max(1, iters/10)
	}
	switch {
	case size <= osuSmall:
		return 1000, 100
	case size < osuLarge:
		return 100, 10
	}
	return 20, 2
}

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
		a, err := parseSize("sizes", strings.TrimSpace(lo), osuMinSize, osuMaxSize)
		if err != nil {
			return nil, err
		}
		if !isRange {
			out = append(out, int(a))
			continue
		}
		b, err := parseSize("sizes", strings.TrimSpace(hi), osuMinSize, osuMaxSize)
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

// osuElemSizes turns byte sizes into whole 4-byte elements for a
// collective: each size is rounded down to a multiple of 4 and sizes below
// 4 bytes are dropped (OSU's reductions start at one float, 4 bytes).
func osuElemSizes(sizes []int) []int {
	var out []int
	for _, s := range sizes {
		if s >= 4 {
			out = append(out, s/4*4)
		}
	}
	return slices.Compact(out)
}

type osuFlags struct {
	sizes, sched, algo string
	iters, warmup      int
	validate, json     bool
	timeout            time.Duration
}

// osuPlan is validated osu input.
type osuPlan struct {
	test          *osuTest
	sizes         []int // bytes; {0} for the barrier
	iters, warmup int   // 0: osuDefaultIters
	sched         string
	algo          comm.Algo // AlgoAuto unless --algo
	validate      bool
	json          bool
	timeout       time.Duration
}

func (f *osuFlags) plan(args []string, sizesSet bool) (osuPlan, error) {
	var p osuPlan
	if len(args) != 1 {
		if len(args) == 0 {
			return p, usagef("osu needs a TEST; allowed: %s", strings.Join(osuTestNames(), ", "))
		}
		return p, usagef("osu takes one TEST, got %d arguments %q; allowed: %s", len(args), args, strings.Join(osuTestNames(), ", "))
	}
	t, ok := findOSUTest(args[0])
	if !ok {
		return p, usagef("osu: unknown test %q; allowed: %s", args[0], strings.Join(osuTestNames(), ", "))
	}
	p.test = t
	spec := f.sizes
	if !sizesSet {
		spec = osuDefaultColl
		if t.kind != osuColl {
			spec = osuDefaultP2P
		}
	}
	sizes, err := parseOSUSizes(spec)
	if err != nil {
		return p, err
	}
	switch {
	case t.coll == comm.CollBarrier && t.kind == osuColl:
		p.sizes = []int{0}
	case t.kind == osuColl:
		p.sizes = osuElemSizes(sizes)
		if len(p.sizes) == 0 {
			return p, usagef("--sizes %q: every size is below 4 bytes; osu %s moves 4-byte %s elements", spec, t.name, t.elem)
		}
	default:
		p.sizes = sizes
		if t.kind != osuLatency && sizes[len(sizes)-1] > osuMaxBWSize {
			return p, usagef("--sizes %q: %d bytes is too large for osu %s, which has 64 messages in flight: allowed up to %d (16 MiB)", spec, sizes[len(sizes)-1], t.name, osuMaxBWSize)
		}
	}
	if f.iters < 0 || f.iters > osuMaxIters {
		return p, usagef("--iters %d is out of range: allowed 1..%d, or 0 for the defaults by size", f.iters, osuMaxIters)
	}
	if f.warmup < 0 || f.warmup > osuMaxIters {
		return p, usagef("--warmup %d is out of range: allowed 1..%d, or 0 for the defaults by size", f.warmup, osuMaxIters)
	}
	p.iters, p.warmup = f.iters, f.warmup
	if f.sched != "" && !slices.Contains(sched.Names(), f.sched) {
		return p, usagef("--sched %q: unknown scheduler; allowed: %s", f.sched, strings.Join(sched.Names(), ", "))
	}
	p.sched = f.sched
	if f.algo != "" && f.algo != "auto" {
		if t.kind != osuColl {
			return p, usagef("--algo %q: osu %s is point to point; --algo applies to the collective tests", f.algo, t.name)
		}
		a, err := comm.ParseAlgo(f.algo)
		if err != nil || !slices.Contains(comm.Algorithms(t.coll), a) {
			return p, usagef("--algo %q: %s has no such algorithm; allowed: %s", f.algo, t.coll, algoNames(comm.Algorithms(t.coll)))
		}
		p.algo = a
	}
	if f.timeout < 0 {
		return p, usagef("--timeout %v: allowed > 0, or 0 for MULTIRAIL_TIMEOUT or comm's default %v", f.timeout, comm.DefaultTimeout)
	}
	p.timeout = f.timeout
	p.validate, p.json = f.validate, f.json
	return p, nil
}

func algoNames(as []comm.Algo) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}

// itersFor returns the iterations and warm-up of a point.
func (p *osuPlan) itersFor(size int) (iters, warmup int) {
	iters, warmup = osuDefaultIters(p.test.kind, size)
	if p.iters > 0 {
		iters = p.iters
	}
	if p.warmup > 0 {
		warmup = p.warmup
	}
	return iters, warmup
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

Iterations (--iters/--warmup 0): latency and collectives 1000/100 up to 8 KiB,
100/10 below 1 MiB, 20/2 from 1 MiB. bw and bibw: 100/10 windows up to 8 KiB,
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
stderr, the bytes it sent on each rail to each peer; --json prints one object
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
	fl.StringVar(&f.sizes, "sizes", "", "message sizes: comma-separated sizes ("+sizeForm+") or MIN:MAX ranges (MIN, 2 MIN, 4 MIN, ... <= MAX), 1B..64MiB (bw, bibw: 16MiB; barrier: none) (default "+osuDefaultP2P+" for latency, bw, bibw; "+osuDefaultColl+" for collectives)")
	fl.IntVar(&f.iters, "iters", 0, "timed iterations per size (0 = by size, see above)")
	fl.IntVar(&f.warmup, "warmup", 0, "untimed warm-up iterations per size (0 = by size, see above)")
	fl.StringVar(&f.sched, "sched", "", "scheduler of every connection: "+strings.Join(sched.Names(), ", ")+" (default MULTIRAIL_SCHED, else the transport's default)")
	fl.StringVar(&f.algo, "algo", "", "force the collective's algorithm (every rank the same), e.g. ring; the test's allowed ones are in the error of a wrong one (default: chosen by size, or MULTIRAIL_ALGO)")
	fl.BoolVar(&f.validate, "validate", false, "check every result against its closed form; exit 1 on a mismatch")
	fl.BoolVar(&f.json, "json", false, "print one JSON object on rank 0 instead of the table")
	fl.DurationVar(&f.timeout, "timeout", 0, fmt.Sprintf("bootstrap timeout (0 = MULTIRAIL_TIMEOUT, else %v)", comm.DefaultTimeout))
	return cmd
}

// osuReport is the --json object.
type osuReport struct {
	Test      string      `json:"test"`
	Ranks     int         `json:"ranks"`
	Launcher  string      `json:"launcher"`
	Sched     string      `json:"sched"`
	Rails     []int       `json:"rails"`
	RailNames [][]string  `json:"rail_names"`
	RailBytes [][]uint64  `json:"rail_bytes"`
	Results   []osuResult `json:"results"`
}

type osuResult struct {
	Size       int      `json:"size"`
	AvgUs      float64  `json:"avg_us"`
	MinUs      float64  `json:"min_us"`
	MaxUs      float64  `json:"max_us"`
	MBs        *float64 `json:"mb_s,omitempty"`
	BusBWBps   *float64 `json:"busbw_bps,omitempty"`
	Algo       string   `json:"algo,omitempty"`
	Iterations int      `json:"iterations"`
	Warmup     int      `json:"warmup"`
	Validated  bool     `json:"validated"`
}

// osuMeasure is one rank's measurement of one size.
type osuMeasure struct {
	avg, min, max float64 // microseconds
	bytes         float64 // bw, bibw: payload bytes moved in the timed iterations
	secs          float64 // bw, bibw: their time
	bad           *osuMismatch
}

// osuMismatch is the first wrong element a rank found.
type osuMismatch struct {
	index, iter int
	got, want   string
}

// Tags of the point-to-point tests.
const (
	osuTagLatency = 1
	osuTagData    = 2
	osuTagAck     = 3
)

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
	return osuBench(ctx, c, p, g.stdout, g.stderr, &finished)
}

// osuBench runs the benchmark on rank c.Rank() of an initialised
// communicator; rank 0 writes the report to stdout and the rail summary to
// stderr. It sets finished when the measurements are over.
func osuBench(ctx context.Context, c *comm.Comm, p osuPlan, stdout, stderr io.Writer, finished *atomic.Bool) error {
	var err error
	t := p.test
	n := c.Size()
	if t.kind != osuColl && n < 2 {
		return fmt.Errorf("osu %s needs at least 2 ranks; this job has %d", t.name, n)
	}
	root := c.Rank() == 0
	out := io.Discard
	if root && !p.json {
		out = stdout
	}
	printOSUHeader(out, p, c)
	rep := osuReport{Test: t.name, Ranks: n, Launcher: c.Launcher(), Results: []osuResult{}}
	for _, size := range p.sizes {
		iters, warmup := p.itersFor(size)
		var m osuMeasure
		var algo string
		switch t.kind {
		case osuLatency:
			m, err = osuRunLatency(ctx, c, size, iters, warmup, p.validate)
		case osuBW:
			m, err = osuRunBW(ctx, c, size, iters, warmup, p.validate)
		case osuBiBW:
			m, err = osuRunBiBW(ctx, c, size, iters, warmup, p.validate)
		default:
			before := collCalls(c, t.coll)
			m, err = osuRunColl(ctx, c, p, size, iters, warmup)
			algo = usedAlgo(before, collCalls(c, t.coll))
		}
		if err != nil {
			return fmt.Errorf("osu %s, size %d: %w", t.name, size, err)
		}
		res, err := osuCombine(ctx, c, p, size, iters, warmup, m)
		if err != nil {
			return err
		}
		res.Algo = algo
		rep.Results = append(rep.Results, res)
		printOSURow(out, p, res)
	}
	// Every rank is done measuring before rank 0 reads the counters and
	// anyone closes. From here on the ranks close their connections as they
	// finish, which is no news (a failure of the barrier still is).
	finished.Store(true)
	if err := c.Barrier(ctx); err != nil {
		return fmt.Errorf("osu %s: final barrier: %w", t.name, err)
	}
	if !root {
		return nil
	}
	st := c.Stats()
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
	printRailSummary(stderr, st)
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

// osuCombine gathers every rank's measurement and validation result: on
// rank 0 the row of the table; on every rank an error if any rank found a
// wrong result.
func osuCombine(ctx context.Context, c *comm.Comm, p osuPlan, size, iters, warmup int, m osuMeasure) (osuResult, error) {
	n := c.Size()
	const k = 6
	bad := -1.0
	if m.bad != nil {
		bad = float64(m.bad.index)
	}
	all := make([]float64, k*n)
	if err := comm.Allgather(ctx, c, []float64{m.avg, m.min, m.max, m.bytes, m.secs, bad}, all); err != nil {
		return osuResult{}, fmt.Errorf("osu %s, size %d: gathering the results: %w", p.test.name, size, err)
	}
	var badRanks []string
	for r := range n {
		if idx := all[k*r+5]; idx >= 0 {
			badRanks = append(badRanks, fmt.Sprintf("rank %d (element %d)", r, int(idx)))
		}
	}
	if len(badRanks) > 0 {
		if m.bad != nil {
			return osuResult{}, fmt.Errorf("osu %s: validation failed on rank %d at size %d: element %d (iteration %d) = %s, want %s",
				p.test.name, c.Rank(), size, m.bad.index, m.bad.iter, m.bad.got, m.bad.want)
		}
		return osuResult{}, fmt.Errorf("osu %s: validation failed at size %d on %s; that rank's error has the values",
			p.test.name, size, strings.Join(badRanks, ", "))
	}
	res := osuResult{Size: size, Iterations: iters, Warmup: warmup, Validated: p.validate}
	t := p.test
	switch t.kind {
	case osuLatency, osuBW, osuBiBW:
		// Rank 0 measured.
		res.AvgUs, res.MinUs, res.MaxUs = all[0], all[1], all[2]
		if t.kind != osuLatency && all[4] > 0 {
			mbs := all[3] / all[4] / 1e6
			res.MBs = &mbs
		}
	default:
		res.MinUs, res.MaxUs = math.Inf(1), math.Inf(-1)
		for r := range n {
			v := all[k*r]
			res.AvgUs += v / float64(n)
			res.MinUs = min(res.MinUs, v)
			res.MaxUs = max(res.MaxUs, v)
		}
		if t.coll != comm.CollBarrier {
			bus := 0.0
			if res.AvgUs > 0 {
				bus = t.algBytes(size, n) * 8 / (res.AvgUs / 1e6) * t.busFactor(n)
			}
			res.BusBWBps = &bus
		}
	}
	return res, nil
}

func printOSUHeader(w io.Writer, p osuPlan, c *comm.Comm) {
	t := p.test
	fmt.Fprintf(w, "# OSU MPI-style %s Test (multirail)\n", t.title)
	rails := "-"
	if c.Size() > 1 {
		if st := c.Stats(); len(st.Peers) > 1 {
			rails = fmt.Sprint(len(st.Peers[1].Rails))
		}
	}
	info := fmt.Sprintf("# ranks %d, launcher %s, rails from rank 0 to rank 1: %s", c.Size(), c.Launcher(), rails)
	if t.elem != "" {
		info += ", datatype " + t.elem
	}
	if p.algo != comm.AlgoAuto {
		info += ", algorithm " + p.algo.String()
	}
	if p.validate {
		info += ", validated"
	}
	fmt.Fprintln(w, info)
	switch {
	case t.kind == osuLatency:
		fmt.Fprintf(w, "%-10s%18s\n", "# Size", "Avg Latency(us)")
	case t.kind == osuBW || t.kind == osuBiBW:
		fmt.Fprintf(w, "%-10s%18s\n", "# Size", "Bandwidth (MB/s)")
	case t.coll == comm.CollBarrier:
		fmt.Fprintf(w, "%s%18s%18s%12s  %s\n", "# Avg Latency(us)", "Min Latency(us)", "Max Latency(us)", "Iterations", "Algorithm")
	default:
		fmt.Fprintf(w, "%-10s%18s%18s%18s%12s%18s  %s\n", "# Size", "Avg Latency(us)", "Min Latency(us)", "Max Latency(us)", "Iterations", "Bus BW(Mbit/s)", "Algorithm")
	}
}

func printOSURow(w io.Writer, p osuPlan, r osuResult) {
	t := p.test
	switch {
	case t.kind == osuLatency:
		fmt.Fprintf(w, "%-10d%18.2f\n", r.Size, r.AvgUs)
	case t.kind == osuBW || t.kind == osuBiBW:
		mbs := 0.0
		if r.MBs != nil {
			mbs = *r.MBs
		}
		fmt.Fprintf(w, "%-10d%18.2f\n", r.Size, mbs)
	case t.coll == comm.CollBarrier:
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
// rail to each peer: every rail of a pair should carry some.
func printRailSummary(w io.Writer, st comm.Stats) {
	fmt.Fprintf(w, "# bytes rank %d sent per rail:\n", st.Rank)
	for _, ps := range st.Peers {
		if ps.Conn == nil {
			continue
		}
		var parts []string
		for _, rs := range ps.Conn.Rails {
			parts = append(parts, fmt.Sprintf("%s %s", rs.Name, osuBytes(rs.BytesSent)))
		}
		fmt.Fprintf(w, "#   to rank %d (%s, %s): %s\n", ps.Rank, ps.Host, ps.Conn.Scheduler.Name, strings.Join(parts, ", "))
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

// Closed forms of --validate. Every value is an integer small enough to be
// exact in its type, so any correct algorithm gives exactly these.

// osuReduceIn is element i of rank r's input to allreduce and
// reduce-scatter.
func osuReduceIn(r, i int) float32 { return float32((r + 1) * (i%7 + 1)) }

// osuReduceWant is element i of the sum over n ranks of osuReduceIn:
// n(n+1)/2 x (i%7+1), exact in float32 up to 2190 ranks.
func osuReduceWant(n, i int) float32 { return float32(n * (n + 1) / 2 * (i%7 + 1)) }

// osuValue is a non-negative int32 determined by (a, b, i): the element i
// that rank a sends to rank b (alltoall), that rank a contributes (allgather,
// b = -1) or that the root broadcasts (a = b = -2). Distinct triples give
// distinct values but for hash collisions (about 1 in 2^31 per pair), so a
// block delivered to the wrong place or shifted is found.
func osuValue(a, b, i int) int32 {
	x := uint64(uint32(a))<<40 ^ uint64(uint32(b))<<20 ^ uint64(i)*0x9e3779b97f4a7c15
	x ^= uint64(uint32(a)) * 0xbf58476d1ce4e5b9
	x ^= uint64(uint32(b)) * 0x94d049bb133111eb
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return int32(x & 0x7fffffff)
}

// osuByte is byte k of the point-to-point messages of size bytes that rank
// src sends.
func osuByte(src, size, k int) byte { return byte((k*131 + size*7 + src*17 + 1) % 251) }

func osuPayload(src, size int) []byte {
	b := make([]byte, size)
	for k := range b {
		b[k] = osuByte(src, size, k)
	}
	return b
}

// checkPayload returns the first wrong byte of a message from src.
func checkPayload(data []byte, src, size, iter int) *osuMismatch {
	if len(data) != size {
		return &osuMismatch{index: min(len(data), size), iter: iter, got: fmt.Sprintf("a message of %d bytes", len(data)), want: fmt.Sprintf("%d bytes", size)}
	}
	for k, v := range data {
		if w := osuByte(src, size, k); v != w {
			return &osuMismatch{index: k, iter: iter, got: fmt.Sprint(v), want: fmt.Sprint(w)}
		}
	}
	return nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// osuRunLatency is osu_latency: after a barrier, rank 0 sends size bytes
// to rank 1 and waits for size bytes back, warmup+iters times.
func osuRunLatency(ctx context.Context, c *comm.Comm, size, iters, warmup int, validate bool) (osuMeasure, error) {
	if err := c.Barrier(ctx); err != nil {
		return osuMeasure{}, err
	}
	r := c.Rank()
	if r > 1 {
		return osuMeasure{}, nil
	}
	peer := 1 - r
	buf := osuPayload(r, size)
	var m osuMeasure
	var total time.Duration
	minD, maxD := time.Duration(math.MaxInt64), time.Duration(0)
	for i := range warmup + iters {
		t0 := time.Now()
		var msg comm.Message
		var err error
		if r == 0 {
			if err = c.Send(ctx, peer, osuTagLatency, buf); err == nil {
				msg, err = c.Recv(ctx, peer, osuTagLatency)
			}
		} else {
			if msg, err = c.Recv(ctx, peer, osuTagLatency); err == nil {
				err = c.Send(ctx, peer, osuTagLatency, buf)
			}
		}
		d := time.Since(t0)
		if err != nil {
			return m, err
		}
		if validate && m.bad == nil {
			m.bad = checkPayload(msg.Data, peer, size, i)
		}
		if i >= warmup {
			total += d
			minD, maxD = min(minD, d), max(maxD, d)
		}
	}
	m.avg = us(total) / float64(2*iters)
	m.min, m.max = us(minD)/2, us(maxD)/2
	return m, nil
}

// osuRunBW is osu_bw: rank 0 posts a window of 64 nonblocking sends of
// size bytes to rank 1, which posts 64 receives and answers the window
// with a 4-byte ack; rank 0 times warmup+iters windows from the first send
// to the ack.
func osuRunBW(ctx context.Context, c *comm.Comm, size, iters, warmup int, validate bool) (osuMeasure, error) {
	if err := c.Barrier(ctx); err != nil {
		return osuMeasure{}, err
	}
	r := c.Rank()
	if r > 1 {
		return osuMeasure{}, nil
	}
	var m osuMeasure
	buf := osuPayload(0, size)
	ack := make([]byte, 4)
	reqs := make([]*comm.Request, osuWindow)
	var total time.Duration
	minD, maxD := time.Duration(math.MaxInt64), time.Duration(0)
	for i := range warmup + iters {
		t0 := time.Now()
		if r == 0 {
			for j := range reqs {
				reqs[j] = c.Isend(ctx, 1, osuTagData, buf)
			}
			if err := comm.WaitAll(ctx, reqs...); err != nil {
				return m, err
			}
			if _, err := c.Recv(ctx, 1, osuTagAck); err != nil {
				return m, err
			}
		} else {
			for j := range reqs {
				reqs[j] = c.Irecv(ctx, 0, osuTagData)
			}
			if err := comm.WaitAll(ctx, reqs...); err != nil {
				return m, err
			}
			if err := c.Send(ctx, 0, osuTagAck, ack); err != nil {
				return m, err
			}
			if validate && m.bad == nil {
				m.bad = checkWindow(ctx, reqs, 0, size, i)
			}
		}
		d := time.Since(t0)
		if i >= warmup {
			total += d
			minD, maxD = min(minD, d), max(maxD, d)
		}
	}
	m.avg = us(total) / float64(iters*osuWindow)
	m.min, m.max = us(minD)/osuWindow, us(maxD)/osuWindow
	m.bytes = float64(size) * osuWindow * float64(iters)
	m.secs = total.Seconds()
	return m, nil
}

// checkWindow validates the messages of completed receives.
func checkWindow(ctx context.Context, reqs []*comm.Request, src, size, iter int) *osuMismatch {
	for _, rq := range reqs {
		msg, err := rq.Wait(ctx)
		if err != nil {
			continue
		}
		if bad := checkPayload(msg.Data, src, size, iter); bad != nil {
			return bad
		}
	}
	return nil
}

// osuRunBiBW is osu_bibw: ranks 0 and 1 each post a window of 64 receives
// and 64 sends at once and wait for all of them; the bandwidth counts both
// directions.
func osuRunBiBW(ctx context.Context, c *comm.Comm, size, iters, warmup int, validate bool) (osuMeasure, error) {
	if err := c.Barrier(ctx); err != nil {
		return osuMeasure{}, err
	}
	r := c.Rank()
	if r > 1 {
		return osuMeasure{}, nil
	}
	peer := 1 - r
	var m osuMeasure
	buf := osuPayload(r, size)
	recvs := make([]*comm.Request, osuWindow)
	sends := make([]*comm.Request, osuWindow)
	var total time.Duration
	minD, maxD := time.Duration(math.MaxInt64), time.Duration(0)
	for i := range warmup + iters {
		t0 := time.Now()
		for j := range recvs {
			recvs[j] = c.Irecv(ctx, peer, osuTagData)
		}
		for j := range sends {
			sends[j] = c.Isend(ctx, peer, osuTagData, buf)
		}
		if err := comm.WaitAll(ctx, append(slices.Clone(sends), recvs...)...); err != nil {
			return m, err
		}
		d := time.Since(t0)
		if validate && m.bad == nil {
			m.bad = checkWindow(ctx, recvs, peer, size, i)
		}
		if i >= warmup {
			total += d
			minD, maxD = min(minD, d), max(maxD, d)
		}
	}
	m.avg = us(total) / float64(iters*osuWindow)
	m.min, m.max = us(minD)/osuWindow, us(maxD)/osuWindow
	m.bytes = 2 * float64(size) * osuWindow * float64(iters)
	m.secs = total.Seconds()
	return m, nil
}

// osuRunColl times one collective: warmup+iters calls, each timed alone,
// a barrier after each; the rank's average over the timed ones.
func osuRunColl(ctx context.Context, c *comm.Comm, p osuPlan, size, iters, warmup int) (osuMeasure, error) {
	var opts []comm.CollOption
	if p.algo != comm.AlgoAuto {
		opts = append(opts, comm.WithAlgo(p.algo))
	}
	n, r := c.Size(), c.Rank()
	count := size / 4
	validate := p.validate
	var m osuMeasure
	// prepare runs untimed before each call, op is timed, check runs
	// untimed after it.
	var prepare func()
	var op func() error
	var check func(iter int) *osuMismatch
	switch p.test.coll {
	case comm.CollBarrier:
		op = func() error { return c.Barrier(ctx, opts...) }
	case comm.CollAllreduce:
		in := make([]float32, count)
		for i := range in {
			in[i] = osuReduceIn(r, i)
		}
		buf := make([]float32, count)
		prepare = func() { copy(buf, in) } // Allreduce works in place
		op = func() error { return comm.Allreduce(ctx, c, buf, comm.Sum, opts...) }
		check = func(iter int) *osuMismatch {
			for i, v := range buf {
				if w := osuReduceWant(n, i); v != w {
					return &osuMismatch{index: i, iter: iter, got: fmt.Sprint(v), want: fmt.Sprint(w)}
				}
			}
			return nil
		}
	case comm.CollReduceScatter:
		send := make([]float32, count)
		for i := range send {
			send[i] = osuReduceIn(r, i)
		}
		lo, hi := comm.ReduceScatterCounts(count, n, r)
		recv := make([]float32, hi-lo)
		if validate {
			prepare = func() { fill(recv, -1) }
		}
		op = func() error { return comm.ReduceScatter(ctx, c, send, recv, comm.Sum, opts...) }
		check = func(iter int) *osuMismatch {
			for j, v := range recv {
				if w := osuReduceWant(n, lo+j); v != w {
					return &osuMismatch{index: lo + j, iter: iter, got: fmt.Sprint(v), want: fmt.Sprint(w)}
				}
			}
			return nil
		}
	case comm.CollBcast:
		buf := make([]int32, count)
		want := make([]int32, count)
		for i := range want {
			want[i] = osuValue(-2, -2, i)
		}
		if r == 0 {
			copy(buf, want)
		}
		if validate && r != 0 {
			prepare = func() { fill(buf, -1) }
		}
		op = func() error { return comm.Bcast(ctx, c, buf, 0, opts...) }
		check = func(iter int) *osuMismatch { return firstDiff(buf, want, iter) }
	case comm.CollAllgather:
		send := make([]int32, count)
		for i := range send {
			send[i] = osuValue(r, -1, i)
		}
		recv := make([]int32, n*count)
		want := make([]int32, n*count)
		for s := range n {
			for i := range count {
				want[s*count+i] = osuValue(s, -1, i)
			}
		}
		if validate {
			prepare = func() { fill(recv, -1) }
		}
		op = func() error { return comm.Allgather(ctx, c, send, recv, opts...) }
		check = func(iter int) *osuMismatch { return firstDiff(recv, want, iter) }
	case comm.CollAlltoall:
		send := make([]int32, n*count)
		want := make([]int32, n*count)
		for j := range n {
			for i := range count {
				send[j*count+i] = osuValue(r, j, i)
				want[j*count+i] = osuValue(j, r, i)
			}
		}
		recv := make([]int32, n*count)
		if validate {
			prepare = func() { fill(recv, -1) }
		}
		op = func() error { return comm.Alltoall(ctx, c, send, recv, opts...) }
		check = func(iter int) *osuMismatch { return firstDiff(recv, want, iter) }
	default:
		return m, fmt.Errorf("osu: no runner for %s", p.test.coll)
	}
	barrier := p.test.coll != comm.CollBarrier // a barrier needs no barrier after it
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

func fill[T any](s []T, v T) {
	for i := range s {
		s[i] = v
	}
}

func firstDiff(got, want []int32, iter int) *osuMismatch {
	for i := range got {
		if got[i] != want[i] {
			return &osuMismatch{index: i, iter: iter, got: fmt.Sprint(got[i]), want: fmt.Sprint(want[i])}
		}
	}
	return nil
}
