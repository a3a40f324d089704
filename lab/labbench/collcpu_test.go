package labbench

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/multirail/multirail/lab"
)

// clockAt is a lineClock whose lines arrive at the given times, one
// Write per time.
func clockAt(t0 time.Time, writes []string, at []time.Duration) *lineClock {
	c := &lineClock{}
	for i, w := range writes {
		now := t0.Add(at[i])
		c.now = func() time.Time { return now }
		_, _ = c.Write([]byte(w))
	}
	return c
}

func TestLineClockWindows(t *testing.T) {
	t0 := time.Unix(1000, 0)
	// mrosu: its header, then a result per size; a line may come in
	// pieces, several lines in one write.
	c := clockAt(t0, []string{"noise before the header\n# mrosu: OSU-style Allreduce Test (Open MPI), ranks 4\n", "MROSU allreduce 4 8 ", "1 1 1 1 0 5 1\n",
		"MROSU allreduce 4 1048576 1 1 1 1 0 5 1\nMROSU allreduce 4 4194304 1 1 1 1 0 5 1\n"},
		[]time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 10 * time.Second})
	w := c.windows(resultLine(OpenMPIDefault))
	want := []window{{t0.Add(time.Second), t0.Add(3 * time.Second)}, {t0.Add(3 * time.Second), t0.Add(10 * time.Second)}, {t0.Add(10 * time.Second), t0.Add(10 * time.Second)}}
	if len(w) != 3 || w[0] != want[0] || w[1] != want[1] || w[2] != want[2] {
		t.Errorf("mrosu windows %v, want %v", w, want)
	}
	// gloo_osu: its per-size busy note before each result is no header.
	c = clockAt(t0, []string{"# MROSU test ranks size ...\n", "# gloo_osu: busy 8 0.5 0.4\n", "MROSU allreduce 4 8 1 1 1 1 0 5 1\n"},
		[]time.Duration{time.Second, 4 * time.Second, 4 * time.Second})
	if w := c.windows(resultLine(Gloo)); len(w) != 1 || w[0] != (window{t0.Add(time.Second), t0.Add(4 * time.Second)}) {
		t.Errorf("gloo windows %v", w)
	}
	// multirail osu: the rows of its table after its header lines.
	c = clockAt(t0, []string{"# OSU MPI-style Allreduce Test (multirail)\n# ranks 4, launcher openmpi, rails from rank 0 to rank 1: 3\n# Size ...\n", "1048576  1 1 1 20 300.0  rabenseifner\n"},
		[]time.Duration{time.Second, 5 * time.Second})
	if w := c.windows(resultLine("multirail-qlearn")); len(w) != 1 || w[0] != (window{t0.Add(time.Second), t0.Add(5 * time.Second)}) {
		t.Errorf("multirail windows %v", w)
	}
	// A result without a header before it has no window.
	c = clockAt(t0, []string{"MROSU allreduce 4 8 1 1 1 1 0 5 1\n"}, []time.Duration{time.Second})
	if w := c.windows(resultLine(OpenMPIDefault)); len(w) != 1 || !w[0].from.IsZero() {
		t.Errorf("headless window %v", w)
	}
}

func TestAddCPU(t *testing.T) {
	t0 := time.Unix(2000, 0)
	// The machine is busy 1.5 CPU seconds per second throughout.
	var samples []lab.CPUSample
	for i := range 21 {
		samples = append(samples, lab.CPUSample{At: t0.Add(time.Duration(i) * time.Second), Busy: time.Duration(i) * 1500 * time.Millisecond})
	}
	// 4 ranks, 18 + 2 calls of 100 ms at 400 Mbit/s of bus bandwidth:
	// 4 x 20 x 5 MB = 0.4 GB in [2 s, 6 s]: 6 CPU s, 15 s/GB.
	res := []CollResult{
		{Test: "allreduce", Size: 8, Ranks: 4, AvgUs: 100, BusBWBps: 1e3, Iters: 10, Warmup: 1},
		{Test: "allreduce", Size: 4 << 20, Ranks: 4, AvgUs: 1e5, BusBWBps: 4e8, Iters: 18, Warmup: 2},
	}
	wins := []window{{t0.Add(time.Second), t0.Add(2 * time.Second)}, {t0.Add(2 * time.Second), t0.Add(6 * time.Second)}}
	addCPU(res, wins, samples)
	if r := res[1]; math.Abs(r.GBMoved-0.4) > 1e-9 || math.Abs(r.CPUSeconds-6) > 1e-9 || math.Abs(r.CPUSPerGB-15) > 1e-9 {
		t.Errorf("4 MiB: %.3f CPU s, %.3f GB, %.3f s/GB; want 6, 0.4, 15", r.CPUSeconds, r.GBMoved, r.CPUSPerGB)
	}
	if res[0].CPUSPerGB <= 0 {
		t.Errorf("8 B: no figure (%+v)", res[0])
	}
	// The barrier and the point-to-point tests get none; nor do results
	// whose lines were not all found, nor windows the samples miss.
	other := []CollResult{{Test: "barrier", Ranks: 4, AvgUs: 10, Iters: 10}, {Test: "bw", Size: 1 << 20, Ranks: 2, AvgUs: 10, BusBWBps: 1e8, Iters: 10}}
	addCPU(other, wins, samples)
	short := []CollResult{{Test: "allreduce", Size: 1 << 20, Ranks: 4, AvgUs: 10, BusBWBps: 1e8, Iters: 10}}
	addCPU(short, wins, samples)
	late := []CollResult{{Test: "alltoall", Size: 1 << 20, Ranks: 4, AvgUs: 10, BusBWBps: 1e8, Iters: 10}}
	addCPU(late, []window{{t0.Add(19 * time.Second), t0.Add(25 * time.Second)}}, samples)
	for _, r := range append(append(other, short...), late...) {
		if r.CPUSPerGB != 0 {
			t.Errorf("%s: %v s/GB, want none", r.Test, r.CPUSPerGB)
		}
	}
	ring := []CollResult{{Test: RingTest, GBMoved: 0.3}}
	addRingCPU(ring, window{t0, t0.Add(2 * time.Second)}, samples)
	if math.Abs(ring[0].CPUSPerGB-10) > 1e-9 {
		t.Errorf("ring: %v s/GB, want 10", ring[0].CPUSPerGB)
	}
}

func TestParseOSUText(t *testing.T) {
	plan := CollPlan{}
	stdout := "# OSU MPI-style Allreduce Test (multirail)\n# ranks 3, launcher openmpi, rails from rank 0 to rank 1: 2\n" +
		"# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations    Bus BW(Mbit/s)  Algorithm\n" +
		"8                   100.00             90.00            110.00        1000               0.1  recursive-doubling\n" +
		"4194304          100000.00          99000.00         101000.00          20             447.4  ring\n"
	stderr := "some log line\n# bytes rank 0 sent per rail:\n" +
		"#   to rank 1 (mrch1, weighted): rail0 12.0 MB (190.1 Mbit/s, ack 1.00 ms), rail1 6.0 MB\n" +
		"#   to rank 2 (mrch2, weighted): rail0 12.0 MB, rail1 0 B\n"
	res, err := parseOSUText([]byte(stdout), []byte(stderr), "allreduce", "rail0,rail1", "weighted", plan)
	if err != nil || len(res) != 2 {
		t.Fatalf("%+v, %v", res, err)
	}
	r := res[1]
	if r.Test != "allreduce" || r.Size != 4<<20 || r.Ranks != 3 || r.AvgUs != 1e5 || r.MinUs != 99000 || r.MaxUs != 101000 || r.Iters != 20 ||
		r.Warmup != 2 || math.Abs(r.BusBWBps-447.4e6) > 1 || r.Algo != "ring" || res[0].Warmup != 100 {
		t.Errorf("%+v (warm-up of 8 B %d)", r, res[0].Warmup)
	}
	for _, tc := range []struct{ stderr, rails, sched, want string }{
		{stderr, "rail0,rail1,rail2", "weighted", "rails from rank 0 to rank 1 are rail0,rail1, want rail0,rail1,rail2"},
		{stderr, "rail0,rail1", "qlearn", "rank 0's connection to rank 1 has scheduler weighted, want qlearn"},
		{"# bytes rank 0 sent per rail:\n#   to rank 1 (mrch1, weighted): rail0 1 B, rail1 1 B\n", "rail0,rail1", "weighted", "names 1 peers, want 2"},
	} {
		if _, err := parseOSUText([]byte(stdout), []byte(tc.stderr), "allreduce", tc.rails, tc.sched, plan); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want %q, got %v", tc.want, err)
		}
	}
	// bw: size and MB/s; latency: size and time; barrier: no size.
	bw := "# ranks 2, launcher openmpi, rails from rank 0 to rank 1: 2\n# Size Bandwidth (MB/s)\n1048576              40.00\n"
	one := "#   to rank 1 (mrch1, qlearn): rail0 1 B, rail1 1 B\n"
	if res, err := parseOSUText([]byte(bw), []byte(one), "bw", "rail0,rail1", "qlearn", plan); err != nil || res[0].MBs != 40 || res[0].BusBWBps != 320e6 || math.Abs(res[0].AvgUs-1048576/40.0) > 1e-9 {
		t.Errorf("bw: %+v, %v", res, err)
	}
	bar := "# ranks 2, launcher openmpi, rails from rank 0 to rank 1: 2\n# Avg Latency(us) ...\n            50.00             40.00             60.00        1000  dissemination\n"
	if res, err := parseOSUText([]byte(bar), []byte(one), "barrier", "rail0,rail1", "qlearn", plan); err != nil || res[0].AvgUs != 50 || res[0].Iters != 1000 || res[0].Algo != "dissemination" {
		t.Errorf("barrier: %+v, %v", res, err)
	}
	if _, err := parseOSUText([]byte(bw+"1048576 fast\n"), []byte(one), "bw", "rail0,rail1", "qlearn", plan); err == nil || !strings.Contains(err.Error(), `"1048576 fast"`) {
		t.Errorf("bad row: %v", err)
	}
	if _, err := parseOSUText([]byte("# ranks 2\n"), []byte(one), "bw", "rail0,rail1", "qlearn", plan); err == nil || !strings.Contains(err.Error(), "printed no table") {
		t.Errorf("no rows: %v", err)
	}
}

func TestRailRatesEnv(t *testing.T) {
	if got := railRates([]float64{2e8, 1e8, 5e7}); got != "rail0=200000000,rail1=100000000,rail2=50000000" {
		t.Errorf("got %q", got)
	}
}

func TestCollPlanRunsRing(t *testing.T) {
	p := CollPlan{Tests: []string{"allreduce", "alltoall"}, Systems: []string{IperfRing, "multirail-qlearn"}, Rounds: 3}
	if n := p.Runs(); n != 9 {
		t.Errorf("%d runs, want 3 x (1 ring + 2 tests)", n)
	}
	if Applies(IperfRing, "allreduce") || !Applies(IperfRing, RingTest) || Applies("multirail-qlearn", RingTest) || Applies(Gloo, RingTest) {
		t.Error("iperf3-ring runs as its own test only")
	}
	if p.ringDuration() != DefaultRingDuration {
		t.Errorf("ring duration %v", p.ringDuration())
	}
}
