package labbench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/multirail/multirail/comm"
	"github.com/multirail/multirail/comm/osu"
	"github.com/multirail/multirail/lab"
	"github.com/multirail/multirail/lab/mpi"
	"github.com/multirail/multirail/sched"
)

// Limits of a collective bench.
const (
	// CollPrefix is the namespace prefix of the collective bench's own
	// cluster.
	CollPrefix = "mrc"
	// MinCollSize and MaxCollSize bound its message sizes.
	MinCollSize = 1
	MaxCollSize = 64 << 20
	// MaxRounds bounds CollPlan.Rounds.
	MaxRounds = 20
	// rdzvPort is where rank 0 of a multirail run meets the others.
	rdzvPort = 29500
	// DefaultRingDuration is how long iperf3-ring runs unless
	// CollPlan.RingDuration says.
	DefaultRingDuration = 10 * time.Second
	// RingTest is the test of iperf3-ring's results: the ring runs once
	// per round, not per test or size.
	RingTest = "ring"
)

// CollTests are the tests a collective bench runs: those of `multirail
// osu`, as it names them, and DDPTest (the torch systems only).
var CollTests = []string{"latency", "bw", "bibw", "barrier", "bcast", "allreduce", "allgather", "reduce-scatter", "alltoall", DDPTest}

// CollPlan is validated input of a collective bench: OSU-style tests on a
// cluster of Lab.Hosts hosts, one rank per host.
type CollPlan struct {
	// Lab is the cluster (Hosts >= 2; Rates the rails).
	Lab lab.Config
	// Tests are from CollTests; Sizes the message sizes in bytes (for
	// each test, as `multirail osu --sizes` takes them; bw and bibw up to
	// 16 MiB; DDPTest has none).
	Tests []string
	Sizes []int
	// Systems are openmpi-default, openmpi-weighted, gloo,
	// torch-multirail[-plaintext] and multirail-<sched>[-plaintext];
	// Skipped those left out, and why.
	Systems []string
	Skipped []Skip
	// Iters and Warmup per size; 0 for the defaults by size of `multirail
	// osu` (which mrosu shares). For DDPTest, the timed and warm-up steps
	// (0: DefaultDDPSteps, DefaultDDPWarmup).
	Iters, Warmup int
	// DDPBatch is DDPTest's samples per rank and step (0:
	// DefaultDDPBatch).
	DDPBatch int
	// TorchPython is the Python of the torch-multirail systems; "" finds
	// one in the working directory (FindTorchMultirail).
	TorchPython string
	// Rounds runs every system on every test that many times, the systems
	// interleaved within each round, so that a drifting machine shows as
	// a range rather than as a difference between systems.
	Rounds int
	// RingDuration is how long iperf3-ring's flows run (whole seconds;
	// 0: DefaultRingDuration).
	RingDuration time.Duration
	// Validate makes every system check every result against its closed
	// form (untimed; `multirail osu --validate`, mrosu --validate,
	// gloo_osu.py --validate): a wrong result fails the run.
	Validate bool
}

// Runs is the number of runs: mpirun invocations, and iperf3-ring's once
// per round.
func (p CollPlan) Runs() int {
	n := 0
	for _, t := range p.Tests {
		for _, s := range p.Systems {
			if Applies(s, t) {
				n++
			}
		}
	}
	if slices.Contains(p.Systems, IperfRing) {
		n++
	}
	return n * max(p.Rounds, 1)
}

// ringDuration is p.RingDuration or its default.
func (p CollPlan) ringDuration() time.Duration {
	if p.RingDuration > 0 {
		return p.RingDuration
	}
	return DefaultRingDuration
}

// Applies reports whether system runs test: DDPTest only the torch
// systems, the OSU tests every system but iperf3-ring (which runs once
// per round, as RingTest).
func Applies(system, test string) bool {
	if system == IperfRing || test == RingTest {
		return system == IperfRing && test == RingTest
	}
	return test != DDPTest || IsTorch(system)
}

// CollResult is one size of one test of one system in one round: OSU's
// columns and the bus bandwidth. Fields that do not apply are 0: MBs is
// bw's and bibw's bandwidth (MB = 10^6 B); BusBWBps is a collective's
// nccl-tests bus bandwidth, and for bw and bibw their bandwidth in bits/s.
type CollResult struct {
	System   string  `json:"system"`
	Test     string  `json:"test"`
	Size     int     `json:"size"`
	Round    int     `json:"round"`
	Ranks    int     `json:"ranks"`
	AvgUs    float64 `json:"avg_us"`
	MinUs    float64 `json:"min_us"`
	MaxUs    float64 `json:"max_us"`
	BusBWBps float64 `json:"busbw_bps"`
	MBs      float64 `json:"mb_s"`
	Iters    int     `json:"iterations"`
	// Algo is the algorithm multirail chose ("" for Open MPI, which does
	// not say).
	Algo string `json:"algo,omitempty"`
	// CPUSPerGB is the whole machine's busy CPU seconds (/proc/stat: user,
	// nice, system, irq, softirq of every CPU) per GB (1e9 bytes) moved
	// while this size ran, for the collectives but the barrier and for
	// iperf3-ring; 0 where not measured. The bytes moved are the bus
	// bytes of every rank: ranks x (Iters + Warmup) x BusBWBps/8 x AvgUs
	// (each rank's share of the wire traffic of a bandwidth-optimal
	// algorithm, what the bus bandwidth counts); for iperf3-ring what
	// every flow's receiver got. The window is from the line that ended
	// the previous size (or the program's header) to the line of this
	// size, as the bench read them from mpirun: warm-up, timed calls and
	// the barriers between them.
	CPUSPerGB float64 `json:"cpu_s_per_gb,omitempty"`
	// CPUSeconds and GBMoved are its terms.
	CPUSeconds float64 `json:"cpu_seconds,omitempty"`
	GBMoved    float64 `json:"gb_moved,omitempty"`
	// HostsBps is iperf3-ring's goodput per host (to the next host, its
	// rails summed); BusBWBps is their mean.
	HostsBps []float64 `json:"hosts_bps,omitempty"`
	// Busy is the machine's busy CPU share (all CPUs; 0..1) while this
	// size ran, where the program measured it (gloo_osu.py, ddp_bench.py:
	// the timed steps); 0 if unknown.
	Busy float64 `json:"busy,omitempty"`
	// RanksBusy is the share of all CPUs the ranks' own processes used
	// (every thread, user and system time, summed over the ranks) over
	// the same time (kernel work done while a rank ran, softirq
	// included, is charged to it); Busy less RanksBusy is the work of
	// the kernel's own threads (ksoftirqd) and of everything else on
	// the machine.
	RanksBusy float64 `json:"ranks_busy,omitempty"`

	// Warmup are the untimed calls before Iters (0 where the program did
	// not say).
	// DDPTest only (ddp_bench.py): Size is the gradients' bytes, AvgUs
	// StepMs in us, Min/MaxUs rank 0's fastest and slowest step, Iters
	// the timed steps and Warmup the steps before them. StepMs is the
	// mean step (the slowest rank's), SamplesPerS ranks x Batch per
	// second, ComputeMs a step without the allreduce (ddp.no_sync, the
	// CPUs shared as before); Buckets are DDP's buckets in bytes;
	// LossFirst and LossLast rank 0's loss at the first and last timed
	// step; MaxParamDiff the largest difference of a parameter between
	// ranks at the end (0: replicas agree; a result with another value is
	// an error).
	Warmup       int      `json:"warmup,omitempty"`
	StepMs       float64  `json:"step_ms,omitempty"`
	SamplesPerS  float64  `json:"samples_per_s,omitempty"`
	ComputeMs    float64  `json:"compute_ms,omitempty"`
	Params       int      `json:"params,omitempty"`
	Batch        int      `json:"batch,omitempty"`
	Buckets      []int    `json:"buckets,omitempty"`
	LossFirst    float64  `json:"loss_first,omitempty"`
	LossLast     float64  `json:"loss_last,omitempty"`
	MaxParamDiff *float64 `json:"max_param_diff,omitempty"`
}

// CollRun is one run (one mpirun) of the bench: how long it took and the
// machine's busy CPU share over it (from /proc/stat before and after,
// start-up included: Python importing torch, the rendezvous).
type CollRun struct {
	System  string  `json:"system"`
	Test    string  `json:"test"`
	Round   int     `json:"round"`
	Seconds float64 `json:"seconds"`
	// Busy is the share of all CPUs' time that was busy (user, nice,
	// system, irq, softirq), 0..1; -1 if /proc/stat could not be read.
	Busy float64 `json:"busy"`
	CPUs int     `json:"cpus"`
	OK   bool    `json:"ok"`
}

// CollRunError is a run that failed.
type CollRunError struct {
	System string `json:"system"`
	Test   string `json:"test"`
	Round  int    `json:"round"`
	Err    string `json:"error"`
}

// CollReport is what a collective bench measured, the JSON of `multirail
// lab bench --hosts N --tests ...`.
type CollReport struct {
	Date  time.Time `json:"date"`
	Hosts int       `json:"hosts"`
	// RatesBps are the rails; CeilingBps a host's TCP goodput ceiling in
	// one direction, the sum of the rates x 1448/1514.
	RatesBps   []float64      `json:"rates_bps"`
	CeilingBps float64        `json:"ceiling_bps"`
	Systems    []string       `json:"systems"`
	Skipped    []Skip         `json:"skipped,omitempty"`
	Notes      []string       `json:"notes"`
	Results    []CollResult   `json:"results"`
	Failed     []CollRunError `json:"failed,omitempty"`
	Runs       []CollRun      `json:"runs,omitempty"`
}

// CollHooks let the caller follow RunColl.
type CollHooks struct {
	// RunStarts is called before each run, the n-th of total (from 1).
	RunStarts func(n, total int, system, test string, round int)
	// RunFailed is called when a run failed; the bench goes on.
	RunFailed func(system, test string, round int, err error)
}

// CollOptions configure RunColl.
type CollOptions struct {
	Plan CollPlan
	// Exe is this program: the ranks of the multirail systems run `Exe
	// osu`, and Open MPI's rsh agent is `Exe lab rsh`.
	Exe string
	// Logger gets the lab's logs; nil discards them.
	Logger *slog.Logger
	// Stderr, when set, gets what the runs write on stderr.
	Stderr io.Writer
	// RunTimeout bounds one mpirun; 0 means 15 minutes.
	RunTimeout time.Duration

	// clock, when set, gets the time of every line of a run's stdout.
	clock *lineClock
}

// RunColl builds the plan's cluster, runs every system on every test
// (rounds x tests x systems, systems interleaved), removes the cluster and
// returns the report. Failed runs are in the report (and make a
// RunsError); ctx ending stops the bench.
func RunColl(ctx context.Context, o CollOptions, hooks CollHooks) (CollReport, error) {
	p := o.Plan
	rep := CollReport{Date: time.Now().UTC(), Hosts: p.Lab.Hosts, RatesBps: p.Lab.Rates, Systems: p.Systems, Skipped: p.Skipped}
	var sum float64
	for _, r := range p.Lab.Rates {
		sum += r
	}
	rep.CeilingBps = lab.GoodputCeiling(sum)
	if o.Exe == "" || strings.ContainsAny(o.Exe, " \t\n'\"") {
		return rep, fmt.Errorf("lab bench: this program's path %q is empty or has spaces or quotes; Open MPI's rsh agent cannot carry it", o.Exe)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.RunTimeout == 0 {
		o.RunTimeout = 15 * time.Minute
	}
	var (
		mrosu, torch string
		gloo         GlooFiles
		tm           TorchSetup
	)
	if slices.ContainsFunc(p.Systems, IsMPI) || slices.ContainsFunc(p.Systems, IsTorch) {
		dir, err := mpi.CacheDir()
		if err != nil {
			return rep, fmt.Errorf("lab bench: %w", err)
		}
		if slices.ContainsFunc(p.Systems, IsMPI) {
			if mrosu, err = mpi.BuildOSU(ctx, dir); err != nil {
				return rep, err
			}
		}
		if slices.Contains(p.Systems, Gloo) {
			if torch, err = GlooAvailable(ctx); err != nil {
				return rep, err
			}
		}
		if slices.Contains(p.Systems, TorchMultirail) || slices.Contains(p.Systems, TorchMultirailPlaintext) {
			if tm, err = FindTorchMultirail(ctx, p.TorchPython, ""); err != nil {
				return rep, err
			}
			if tm, err = tm.Snapshot(dir); err != nil {
				return rep, err
			}
		}
		if slices.ContainsFunc(p.Systems, IsTorch) {
			if gloo, err = WriteGlooFiles(dir); err != nil {
				return rep, err
			}
		}
	}
	cfg := p.Lab
	cfg.Logger = o.Logger
	l, err := lab.Up(ctx, cfg)
	if err != nil {
		return rep, err
	}
	defer l.Down()
	token, err := randomToken()
	if err != nil {
		return rep, err
	}
	rep.Notes = collNotes(p, torch, tm)
	total, n := p.Runs(), 0
	var failed []string
	for round := 1; round <= max(p.Rounds, 1); round++ {
		tests := p.Tests
		if slices.Contains(p.Systems, IperfRing) {
			// The ceiling first, on a machine no run has warmed yet
			// differently from the others.
			tests = append([]string{RingTest}, tests...)
		}
		for _, test := range tests {
			for _, sys := range p.Systems {
				if !Applies(sys, test) {
					continue
				}
				n++
				if hooks.RunStarts != nil {
					hooks.RunStarts(n, total, sys, test, round)
				}
				var (
					res     []CollResult
					ringWin window
				)
				ro := o
				ro.clock = &lineClock{}
				stop := sampleCPU(cpuEvery)
				cpu0, cpuErr0 := lab.ReadCPU()
				switch {
				case sys == IperfRing:
					res, ringWin, err = runRing(ctx, p, l)
				case IsMPI(sys):
					res, err = runOpenMPI(ctx, ro, l, mrosu, sys, test)
				case IsTorch(sys):
					res, err = runGloo(ctx, ro, l, gloo, tm, token, n, sys, test)
				default:
					res, err = runMultirailOSU(ctx, ro, l, token, n, sys, test)
				}
				cpu1, cpuErr1 := lab.ReadCPU()
				samples := stop()
				rep.Runs = append(rep.Runs, collRun(sys, test, round, cpu0, cpu1, errors.Join(cpuErr0, cpuErr1), err == nil))
				_ = l.KillProcesses()
				if ctx.Err() != nil {
					return rep, ctx.Err()
				}
				if err != nil {
					rep.Failed = append(rep.Failed, CollRunError{System: sys, Test: test, Round: round, Err: err.Error()})
					failed = append(failed, fmt.Sprintf("%s/%s/round %d", sys, test, round))
					if hooks.RunFailed != nil {
						hooks.RunFailed(sys, test, round, err)
					}
					continue
				}
				if sys != IperfRing {
					addCPU(res, ro.clock.windows(resultLine(sys)), samples)
				} else {
					addRingCPU(res, ringWin, samples)
				}
				for i := range res {
					res[i].System, res[i].Round = sys, round
				}
				rep.Results = append(rep.Results, res...)
			}
		}
	}
	if err := l.Down(); err != nil {
		return rep, err
	}
	if len(failed) > 0 {
		return rep, &RunsError{Failed: failed, Runs: total}
	}
	return rep, nil
}

// collNotes says how each system was set up; torch is torch's version
// (gloo), tm how the torch-multirail systems start.
func collNotes(p CollPlan, torch string, tm TorchSetup) []string {
	notes := []string{fmt.Sprintf("%d hosts, one rank each, all on this machine's CPUs (%d); tbf on both ends of every host NIC; one switch (bridge) per rail", p.Lab.Hosts, runtime.NumCPU()),
		"CPU s/GB: the whole machine's busy CPU seconds (/proc/stat, sampled every 100 ms) per GB (1e9 B) of bus bytes moved, every rank's " +
			"(ranks x calls with warm-up x busbw/8 x time per call; iperf3-ring: the bytes its receivers got), over each size's window " +
			"(from the line that ended the previous size to its own, as read from mpirun); everything else the machine ran meanwhile counts too"}
	if slices.Contains(p.Tests, DDPTest) {
		steps, warmup := p.DDPSteps()
		notes = append(notes, fmt.Sprintf("ddp: ddp_bench.py (lab/labbench) under the torch systems' start: DistributedDataParallel with default buckets (25 MiB, the first 1 MiB) "+
			"of an MLP 1024-2048-1024-1024-10 (ReLU; 5,257,226 float32 parameters, 21.0 MB of gradients), one fixed synthetic batch of %d samples per rank (seed 0 and the rank), "+
			"cross-entropy, SGD lr 0.01; %d warm-up and %d timed steps; OMP_NUM_THREADS=1", p.ddpBatch(), warmup, steps))
	}
	for _, s := range p.Systems {
		switch {
		case s == TorchMultirail || s == TorchMultirailPlaintext:
			mode := "sealed frames (the transport's default)"
			if IsPlaintext(s) {
				mode = "frames in clear (MULTIRAIL_PLAINTEXT=1)"
			}
			notes = append(notes, fmt.Sprintf("%s: torch.distributed %s, backend multirail (python/multirail over build/libmultirail.so; %s), the programs and the start of gloo "+
				"(one torchrun per host, c10d rendezvous on host 0's control address, the same mpirun and rsh agent), %s; the backend meets through torch's store; "+
				"rails from the hosts' NICs with MULTIRAIL_IFNAME=rail, MULTIRAIL_SCHED=qlearn, GOMAXPROCS left to the communicator", s, tm.Torch, tm.How, mode))
		case s == IperfRing:
			notes = append(notes, fmt.Sprintf("%s: every host sends to the next (the last to host 0) on every rail at once for %v, one iperf3 client per rail bound to the host's address on it, "+
				"to an iperf3 server on the next host's; its bus bandwidth is the mean over the hosts of the goodput each sent (its rails summed, at the receivers), "+
				"what a collective's bus bandwidth is compared with; it runs once per round, before the tests", s, p.ringDuration()))
			continue
		case s == OpenMPIDefault:
			notes = append(notes, s+": mpirun, pml ob1, btl tcp,self on the rails' subnets, default weights, mpi_yield_when_idle 1, mrosu (lab/mpi/src/mrosu.c)")
		case s == OpenMPIWeighted:
			notes = append(notes, s+": as openmpi-default with btl_tcp_bandwidth_railN set to the rails' rates")
		case s == Gloo:
			notes = append(notes, fmt.Sprintf("%s: torch.distributed %s (Debian's python3-torch), backend gloo, gloo_osu.py (lab/labbench) under one torchrun per host "+
				"(c10d rendezvous on host 0's control address), each started by the same mpirun and rsh agent; GLOO_SOCKET_IFNAME=%s: "+
				"one Gloo device per rail, and torch picks one per call (collectives in turn by sequence number, send/recv by tag; "+
				"gloo_osu uses tag 0, so rail0), never striping one call", s, torch, strings.Join(railDevNames(len(p.Lab.Rates)), ",")))
		default:
			mode := "sealed frames (the default)"
			if IsPlaintext(s) {
				mode = "frames in clear (MULTIRAIL_PLAINTEXT=1)"
			}
			notes = append(notes, s+": `multirail osu` under the same mpirun and rsh agent, rails found from the hosts' NICs with MULTIRAIL_IFNAME=rail, MULTIRAIL_SCHED="+SchedOf(s)+", "+mode+", GOMAXPROCS left to the communicator (it gives each rank its share of the machine's cores: 1), busy polling for the communicator's default 200 us")
		}
	}
	return notes
}

// collRun is the CollRun between two samples of /proc/stat (cpuErr the
// errors reading them).
func collRun(sys, test string, round int, cpu0, cpu1 lab.CPUSample, cpuErr error, ok bool) CollRun {
	r := CollRun{System: sys, Test: test, Round: round, Seconds: cpu1.At.Sub(cpu0.At).Seconds(), Busy: -1, CPUs: runtime.NumCPU(), OK: ok}
	if cpuErr == nil && r.Seconds > 0 {
		r.Busy = (cpu1.Busy - cpu0.Busy).Seconds() / (r.Seconds * float64(r.CPUs))
	}
	return r
}

func randomToken() (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("lab bench: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// railDevNames are the names of k rails' NICs.
func railDevNames(k int) []string {
	devs := make([]string, k)
	for i := range devs {
		devs[i] = lab.RailDev(i)
	}
	return devs
}

// railNets and railDevs of l.
func railNets(l *lab.Lab) (nets, devs []string) {
	for k := 0; k < l.Rails(); k++ {
		nets = append(nets, lab.RailNet(k))
		devs = append(devs, lab.RailDev(k))
	}
	return nets, devs
}

// ranksOf are the hosts a test runs on: two for the point-to-point tests
// (as OSU's), every host for the collectives.
func ranksOf(l *lab.Lab, test string) []string {
	hosts := l.HostNames()
	if test == "latency" || test == "bw" || test == "bibw" {
		return hosts[:2]
	}
	return hosts
}

// onHost0 wraps argv to run in the first host's namespace with its host
// name, as mpirun must (its daemons are started from there).
func onHost0(host string, argv []string) []string {
	return append([]string{"ip", "netns", "exec", host, "unshare", "--uts", "sh", "-c", `hostname "$0" && exec "$@"`, host}, argv...)
}

func runOpenMPI(ctx context.Context, o CollOptions, l *lab.Lab, program, sys, test string) ([]CollResult, error) {
	nets, devs := railNets(l)
	hosts := ranksOf(l, test)
	j := mpi.CollJob{Hosts: hosts, RshAgent: o.Exe + " lab rsh", OOBNet: lab.CtlNet(), RailNets: nets, RailDevs: devs,
		Program: program, Test: test, Sizes: o.Plan.Sizes, Iters: o.Plan.Iters, Warmup: o.Plan.Warmup, Validate: o.Plan.Validate}
	if sys == OpenMPIWeighted {
		for _, r := range o.Plan.Lab.Rates {
			j.BandwidthMbps = append(j.BandwidthMbps, int(r/1e6))
		}
	}
	out, err := runMPIRun(ctx, o, hosts[0], mpi.CollArgs(j))
	if err != nil {
		return nil, err
	}
	return parseMROSU(out, "mrosu", test, len(hosts))
}

// parseMROSU reads the result lines of mrosu or gloo_osu.py (program) in
// out: every one must be of test with ranks ranks, and there must be one.
// bw's and bibw's bandwidth is also their BusBWBps.
func parseMROSU(out []byte, program, test string, ranks int) ([]CollResult, error) {
	var res []CollResult
	busy := parseBusy(out)
	for _, line := range strings.Split(string(out), "\n") {
		r, err := mpi.ParseOSULine(line)
		if errors.Is(err, mpi.ErrNoResult) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", program, test, err)
		}
		if r.Test != test || r.Ranks != ranks {
			return nil, fmt.Errorf("%s %s: result %q is of %s with %d ranks, want %s with %d", program, test, strings.TrimSpace(line), r.Test, r.Ranks, test, ranks)
		}
		cr := CollResult{Test: r.Test, Size: r.Size, Ranks: r.Ranks, AvgUs: r.AvgUs, MinUs: r.MinUs, MaxUs: r.MaxUs,
			BusBWBps: r.BusBWBps, MBs: r.MBs, Iters: r.Iters, Warmup: r.Warmup, Busy: busy[r.Size].machine, RanksBusy: busy[r.Size].ranks}
		if cr.MBs > 0 && cr.BusBWBps == 0 {
			cr.BusBWBps = cr.MBs * 8e6
		}
		res = append(res, cr)
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("%s %s printed no results: %s", program, test, lastLines(string(out), 8))
	}
	return res, nil
}

func runMultirailOSU(ctx context.Context, o CollOptions, l *lab.Lab, token string, n int, sys, test string) ([]CollResult, error) {
	if !IsMultirail(sys) {
		return nil, &UnknownSystemError{Item: sys}
	}
	scheduler := SchedOf(sys)
	hosts := ranksOf(l, test)
	nets, devs := railNets(l)
	// The same launch as Open MPI's (mpi.CollArgs without the MPI
	// program): mpirun on host 0, one rank per host, the lab's rsh agent.
	j := mpi.CollJob{Hosts: hosts, RshAgent: o.Exe + " lab rsh", OOBNet: lab.CtlNet(), RailNets: nets, RailDevs: devs, Program: o.Exe}
	argv := mpi.LaunchArgs(j)
	// A port of its own per run: the previous run's rank 0 may still hold
	// the last one in TIME_WAIT.
	port := rdzvPort + n%400
	// No GOMAXPROCS: the communicator lowers it to each rank's share of
	// the machine's CPUs, as it does for users (the hosts share this
	// machine's kernel; comm.Config.KeepGOMAXPROCS).
	for _, kv := range []string{"MULTIRAIL_IFNAME=rail", "MULTIRAIL_RDZV=tcp://" + hosts[0] + ":" + strconv.Itoa(port),
		"MULTIRAIL_TOKEN=" + token, "MULTIRAIL_SCHED=" + scheduler} {
		argv = append(argv, "-x", kv)
	}
	if scheduler == sched.NameWeighted {
		// The true rates, as the two-host bench gives them.
		argv = append(argv, "-x", comm.EnvRailRates+"="+railRates(o.Plan.Lab.Rates))
	}
	if IsPlaintext(sys) {
		argv = append(argv, "-x", "MULTIRAIL_PLAINTEXT=1")
	}
	// The text table, not --json: rank 0 prints each size's row as it is
	// measured, which times the size's window for its CPU figure.
	argv = append(argv, o.Exe, "osu", test, "--sizes", mpi.JoinSizes(o.Plan.Sizes),
		"--iters", strconv.Itoa(o.Plan.Iters), "--warmup", strconv.Itoa(o.Plan.Warmup))
	if o.Plan.Validate {
		argv = append(argv, "--validate")
	}
	stdout, stderr, err := execMPIRun(ctx, o, hosts[0], argv)
	if err != nil {
		return nil, err
	}
	return parseOSUText(stdout, stderr, test, strings.Join(devs, ","), scheduler, o.Plan)
}

// railRates is MULTIRAIL_RAIL_RATES for the lab's rails: railK=RATE in
// bits/s.
func railRates(rates []float64) string {
	parts := make([]string, len(rates))
	for k, r := range rates {
		parts[k] = lab.RailDev(k) + "=" + strconv.FormatFloat(r, 'f', -1, 64)
	}
	return strings.Join(parts, ",")
}

// parseOSUText reads the table `multirail osu TEST` prints on stdout (one
// row per size; warm-up counts from plan as osu's defaults give them)
// and checks, in the rail summary on stderr, that rank 0 reached every
// other rank over exactly the rails wantRails with scheduler wantSched.
func parseOSUText(stdout, stderr []byte, test, wantRails, wantSched string, plan CollPlan) ([]CollResult, error) {
	t, ok := osu.Find(test)
	if !ok {
		return nil, fmt.Errorf("multirail osu %s: unknown test", test)
	}
	op := osu.Plan{Test: t, Iters: plan.Iters, Warmup: plan.Warmup}
	ranks := 0
	var res []CollResult
	for _, line := range strings.Split(string(stdout), "\n") {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "# ranks "); ok {
			ranks, _ = strconv.Atoi(strings.TrimRight(strings.Fields(rest)[0], ","))
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		num := func(i int) float64 {
			if i >= len(f) {
				return math.NaN()
			}
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return math.NaN()
			}
			return v
		}
		var r CollResult
		switch {
		case t.Kind == osu.Latency && len(f) == 2:
			r = CollResult{Size: int(num(0)), AvgUs: num(1)}
		case (t.Kind == osu.BW || t.Kind == osu.BiBW) && len(f) == 2:
			r = CollResult{Size: int(num(0)), MBs: num(1)}
			if r.MBs > 0 {
				r.AvgUs = float64(r.Size) / r.MBs // MB/s = bytes per us
			}
			r.BusBWBps = r.MBs * 8e6
		case test == "barrier" && len(f) >= 4:
			r = CollResult{AvgUs: num(0), MinUs: num(1), MaxUs: num(2), Iters: int(num(3))}
			if len(f) > 4 {
				r.Algo = f[4]
			}
		case len(f) >= 6:
			r = CollResult{Size: int(num(0)), AvgUs: num(1), MinUs: num(2), MaxUs: num(3), Iters: int(num(4)), BusBWBps: num(5) * 1e6}
			if len(f) > 6 {
				r.Algo = f[6]
			}
		default:
			return nil, fmt.Errorf("multirail osu %s: row %q is not one of its table", test, line)
		}
		if math.IsNaN(r.AvgUs) || math.IsNaN(r.MBs) || math.IsNaN(r.BusBWBps) || math.IsNaN(r.MinUs) || math.IsNaN(r.MaxUs) {
			return nil, fmt.Errorf("multirail osu %s: row %q has a field that is not a number", test, line)
		}
		iters, warmup := op.ItersFor(r.Size)
		if r.Iters == 0 {
			r.Iters = iters
		}
		r.Test, r.Ranks, r.Warmup = test, ranks, warmup
		res = append(res, r)
	}
	if len(res) == 0 || ranks == 0 {
		return nil, fmt.Errorf("multirail osu %s printed no table: %s", test, lastLines(string(stdout)+string(stderr), 8))
	}
	peers := 0
	for _, line := range strings.Split(string(stderr), "\n") {
		m := railSummary.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		peers++
		var names []string
		for _, p := range railPart.FindAllStringSubmatch(m[4], -1) {
			names = append(names, p[1])
		}
		if got := strings.Join(names, ","); got != wantRails {
			return nil, fmt.Errorf("multirail osu %s: rails from rank 0 to rank %s are %s, want %s", test, m[1], got, wantRails)
		}
		if m[3] != wantSched {
			return nil, fmt.Errorf("multirail osu %s: rank 0's connection to rank %s has scheduler %s, want %s", test, m[1], m[3], wantSched)
		}
	}
	if peers != ranks-1 {
		return nil, fmt.Errorf("multirail osu %s: rank 0's rail summary names %d peers, want %d: %s", test, peers, ranks-1, lastLines(string(stderr), 8))
	}
	return res, nil
}

// railSummary is a line of rank 0's rail summary on stderr ("#   to rank
// 1 (mrch1, qlearn): rail0 1.2 MB (190.1 Mbit/s, ack 1.00 ms), rail1 ...");
// railPart one rail in it.
var (
	railSummary = regexp.MustCompile(`^#\s+to rank (\d+) \(([^,]*), ([^)]*)\): (.*)$`)
	railPart    = regexp.MustCompile(`(?:^|, )(\S+) [0-9.]+ (?:GB|MB|kB|B)\b`)
)

// runMPIRun runs argv (mpirun) inside host and returns its stdout.
func runMPIRun(ctx context.Context, o CollOptions, host string, argv []string) ([]byte, error) {
	stdout, _, err := execMPIRun(ctx, o, host, argv)
	return stdout, err
}

// execMPIRun runs argv (mpirun) inside host (see onHost0) and returns its
// stdout and its stderr, and an error that names argv and ends with
// stderr's last lines if it failed.
func execMPIRun(ctx context.Context, o CollOptions, host string, argv []string) (stdout, stderr []byte, err error) {
	ctx, cancel := context.WithTimeout(ctx, o.RunTimeout)
	defer cancel()
	full := onHost0(host, argv)
	cmd := exec.CommandContext(ctx, full[0], full[1:]...)
	cmd.Env = append(os.Environ(), mpi.Env()...)
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	if o.clock != nil {
		cmd.Stdout = io.MultiWriter(&out, o.clock)
	}
	cmd.Stderr = &errb
	if o.Stderr != nil {
		cmd.Stderr = io.MultiWriter(&errb, o.Stderr)
	}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (after %v)", ctx.Err(), o.RunTimeout)
		}
		return out.Bytes(), errb.Bytes(), fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, lastLines(errb.String(), 8))
	}
	return out.Bytes(), errb.Bytes(), nil
}
