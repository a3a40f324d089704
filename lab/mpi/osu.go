package mpi

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// OSUSource is src/mrosu.c: the OSU-style benchmarks of `multirail osu`
// (latency, bw, bibw and the collectives) for Open MPI, measured as
// comm/osu measures the communicator.
//
//go:embed src/mrosu.c
var OSUSource []byte

// OSUTests are the tests mrosu runs, the names of `multirail osu`.
var OSUTests = []string{"latency", "bw", "bibw", "barrier", "bcast", "allreduce", "allgather", "reduce-scatter", "alltoall"}

// BuildOSU compiles OSUSource with mpicc into dir, unless a binary of the
// same source is there already, and returns its path.
func BuildOSU(ctx context.Context, dir string) (string, error) {
	return build(ctx, dir, "mrosu", OSUSource)
}

// CollJob is one mrosu run across the namespaces of a lab, one rank per
// namespace: a collective on every rank, or a point-to-point test between
// ranks 0 and 1 while the others wait.
type CollJob struct {
	// Hosts are the namespace names of ranks 0, 1, ...; they double as
	// host names.
	Hosts []string
	// RshAgent, OOBNet, RailNets, RailDevs and BandwidthMbps are as in
	// Job.
	RshAgent      string
	OOBNet        string
	RailNets      []string
	RailDevs      []string
	BandwidthMbps []int
	// Program is mrosu's path. Test is one of OSUTests and Sizes are
	// its message sizes in bytes (mrosu sorts them and, for a collective,
	// rounds them down to whole 4-byte elements). Iters and Warmup are the
	// timed and untimed iterations per size, 0 for mrosu's defaults by
	// size (those of `multirail osu`).
	Program       string
	Test          string
	Sizes         []int
	Iters, Warmup int
	// Validate makes mrosu check every result (untimed).
	Validate bool
}

// CollArgs is the mpirun command line of j (argv, "mpirun" first): one
// rank per host, as Args, and mpi_yield_when_idle so that ranks sharing a
// core give it up while they wait.
func CollArgs(j CollJob) []string {
	args := launch(j.Hosts, j.RshAgent, j.OOBNet, j.RailNets, j.RailDevs, j.BandwidthMbps)
	args = append(args, mca("mpi_yield_when_idle", "1")...)
	args = append(args, j.Program)
	return append(args, OSUArgs(j.Validate, j.Test, j.Sizes, j.Iters, j.Warmup)...)
}

// OSUArgs are the arguments of mrosu (and of programs that take the same,
// such as the lab's gloo_osu.py): "[--validate] TEST SIZES ITERS WARMUP".
func OSUArgs(validate bool, test string, sizes []int, iters, warmup int) []string {
	var args []string
	if validate {
		args = append(args, "--validate")
	}
	return append(args, test, JoinSizes(sizes), strconv.Itoa(iters), strconv.Itoa(warmup))
}

// JoinSizes writes sizes in bytes comma-separated, as mrosu and
// `multirail osu --sizes` take them.
func JoinSizes(sizes []int) string {
	s := make([]string, len(sizes))
	for i, n := range sizes {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// OSUResult is one size's row of mrosu, as `multirail osu --json` has
// it; fields that do not apply to the test are 0.
type OSUResult struct {
	Test  string
	Ranks int
	// Size is the message size in bytes (0 for the barrier).
	Size int
	// AvgUs, MinUs and MaxUs are microseconds: for latency rank 0's mean
	// and its fastest and slowest ping-pong (halved); for bw and bibw the
	// time per message and the fastest and slowest window divided by 64;
	// for the collectives the min/avg/max over the ranks of each rank's
	// mean.
	AvgUs, MinUs, MaxUs float64
	// BusBWBps is a collective's bus bandwidth in bits/s (nccl-tests').
	BusBWBps float64
	// MBs is bw's and bibw's bandwidth in MB/s (10^6 B).
	MBs           float64
	Iters, Warmup int
}

// ErrNoResult is returned by ParseOSULine for lines that are not mrosu's
// results (its '#' header lines, Open MPI's own messages).
var ErrNoResult = errors.New("mpi: not an mrosu result line")

// ErrMalformed is wrapped by the error of a line that starts as mrosu's
// results do but is not one.
var ErrMalformed = errors.New("mpi: malformed line")

// osuFields is the number of fields of an mrosu result line.
const osuFields = 11

// ParseOSULine parses one result line of mrosu,
//
//	MROSU TEST RANKS SIZE AVG_US MIN_US MAX_US BUSBW_BPS MB_S ITERS WARMUP
//
// Other lines give ErrNoResult; a line that starts with MROSU but is
// not one (wrong count of fields, unknown test, a value that is not a
// number or out of range, min_us <= avg_us <= max_us not holding) an error
// that wraps ErrMalformed.
func ParseOSULine(line string) (OSUResult, error) {
	f := strings.Fields(line)
	if len(f) == 0 || f[0] != "MROSU" {
		return OSUResult{}, ErrNoResult
	}
	bad := func(why string) (OSUResult, error) {
		return OSUResult{}, fmt.Errorf("%w: mrosu result %q: %s", ErrMalformed, line, why)
	}
	if len(f) != osuFields {
		return bad(fmt.Sprintf("%d fields, want %d", len(f), osuFields))
	}
	r := OSUResult{Test: f[1]}
	if !slices.Contains(OSUTests, r.Test) {
		return bad("unknown test " + strconv.Quote(r.Test))
	}
	ints := []struct {
		name string
		dst  *int
		min  int
	}{{"ranks", &r.Ranks, 1}, {"size", &r.Size, 0}, {"iters", &r.Iters, 1}, {"warmup", &r.Warmup, 0}}
	for i, at := range []int{2, 3, 9, 10} {
		v, err := strconv.Atoi(f[at])
		if err != nil || v < ints[i].min {
			return bad(fmt.Sprintf("%s %q: want an integer >= %d", ints[i].name, f[at], ints[i].min))
		}
		*ints[i].dst = v
	}
	floats := []struct {
		name string
		dst  *float64
	}{{"avg_us", &r.AvgUs}, {"min_us", &r.MinUs}, {"max_us", &r.MaxUs}, {"busbw_bps", &r.BusBWBps}, {"mb_s", &r.MBs}}
	for i, x := range floats {
		v, err := strconv.ParseFloat(f[4+i], 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return bad(fmt.Sprintf("%s %q: want a finite number >= 0", x.name, f[4+i]))
		}
		*x.dst = v
	}
	if r.MinUs > r.AvgUs || r.AvgUs > r.MaxUs {
		return bad(fmt.Sprintf("want min_us <= avg_us <= max_us, got %v, %v, %v", r.MinUs, r.AvgUs, r.MaxUs))
	}
	return r, nil
}

// LaunchArgs is the start of an mpirun command line (argv, "mpirun"
// first) that starts a program that is not an MPI program, such as
// `multirail osu`, as CollArgs starts mrosu: one rank per host of j.Hosts,
// no binding to cores, j.RshAgent as the rsh agent and the out-of-band
// traffic on j.OOBNet. Append "-x VAR=value" options, then the program
// and its arguments.
func LaunchArgs(j CollJob) []string {
	slots := make([]string, len(j.Hosts))
	for i, h := range j.Hosts {
		slots[i] = h + ":1"
	}
	args := []string{"mpirun", "-np", strconv.Itoa(len(j.Hosts)), "--host", strings.Join(slots, ","), "--bind-to", "none"}
	args = append(args, mca("plm_rsh_agent", j.RshAgent)...)
	return append(args, mca("oob_tcp_if_include", j.OOBNet)...)
}
