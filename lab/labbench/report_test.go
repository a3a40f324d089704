package labbench

import (
	"encoding/json"
	"errors"
	"math"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/multirail/multirail/lab"
)

func TestWireRails(t *testing.T) {
	// Four bucket boundaries, two rails; rail0 carries 1514 wire bytes a
	// bucket, rail1 3028; a competing stream (series from half time) took
	// 448 payload bytes of rail0 in the last bucket.
	wire := [][]uint64{{0, 0}, {1514, 3028}, {3028, 6056}, {4542, 9084}}
	got := WireRails(wire, lab.LoadResult{Series: []int64{0, 448}})
	want := [][]int64{{1448, 1448, 1000}, {2896, 2896, 2896}}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("rail %d: %v, want %v", i, got[i], want[i])
		}
	}
}

// FakeRun is a run of 8 s: 100 Mbit/s on each of two rails, one of them
// halved in the second half, and a competing stream of 50 Mbit/s.
func fakeRun(system string) Run {
	n := 32
	r0, r1, tot := make([]int64, n), make([]int64, n), make([]int64, n)
	per := int64(100e6 / 8 * Bucket.Seconds())
	for k := range n {
		r0[k], r1[k] = per, per
		if k >= n/2 {
			r0[k] = per / 2
		}
		tot[k] = r0[k] + r1[k]
	}
	load := lab.LoadResult{Bucket: Bucket, Series: make([]int64, n/2)}
	for k := range load.Series {
		load.Series[k] = per / 2
	}
	return Run{System: system, Size: 1 << 20, Window: 8, Rails: [][]int64{r0, r1}, Total: tot, RailsSource: "receiver", Load: load}
}

func TestReport(t *testing.T) {
	p := Plan{Rates: []float64{200e6, 100e6}, Sizes: []int{1 << 20}, Systems: []string{"multirail-weighted", "mptcp"}, Duration: 8 * time.Second,
		Competitor: lab.ToolIperf3}
	rep := NewReport(p, "cubic")
	rep.Add(fakeRun("multirail-weighted"), nil)
	mp := fakeRun("mptcp")
	yes := true
	mp.MPTCP, mp.Subflows = &yes, 2
	rep.Add(mp, nil)
	rep.Add(Run{System: "openmpi-default", Size: 1 << 20}, errors.New("mpirun: exit 1"))
	if len(rep.Results) != 6 || len(rep.Series) != 3 {
		t.Fatalf("%d results, %d series; want 6, 3", len(rep.Results), len(rep.Series))
	}
	st, dy := rep.Results[0], rep.Results[1]
	near := func(a, b float64) bool { return a > b*0.999 && a < b*1.001 }
	if st.Phase != "static" || !near(st.GoodputBps, 200e6) || !near(st.RailsBps[0], 100e6) || st.RailsSource != "receiver" || st.Window != 8 {
		t.Errorf("static: %+v", st)
	}
	if dy.Phase != "dynamic" || !near(dy.GoodputBps, 150e6) || dy.CompetingBps == nil || !near(*dy.CompetingBps, 50e6) {
		t.Errorf("dynamic: %+v", dy)
	}
	if !near(rep.CeilingBps, 300e6*1448/1514) || !near(rep.DynamicFairBps, 200e6*1448/1514) || !near(st.CeilingFraction, 200e6/rep.CeilingBps) {
		t.Errorf("ceiling %g, fair %g, fraction %g", rep.CeilingBps, rep.DynamicFairBps, st.CeilingFraction)
	}
	if st.Note != "given the true rail rates" || rep.Results[2].Note != "MPTCP, 2 subflows" || rep.Results[4].Error != "mpirun: exit 1" {
		t.Errorf("notes: %q, %q, error %q", st.Note, rep.Results[2].Note, rep.Results[4].Error)
	}
	if s := rep.Series[0]; !near(s.Total[0], 200e6) || !near(s.Rails[0][31], 50e6) || len(s.Competing) != 16 || !near(s.Competing[0], 50e6) {
		t.Errorf("series %+v", s)
	}
	nope := false
	fb := fakeRun("mptcp")
	fb.MPTCP, fb.Note = &nope, "competing stream: x"
	rep.Add(fb, nil)
	if got := rep.Results[6].Note; got != "competing stream: x; fell back to TCP" {
		t.Errorf("note %q", got)
	}

	// The JSON has the contract's fields.
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"ceiling_bps", "rates_bps", "results", "dynamic_fair_bps", "skipped"} {
		if _, ok := obj[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	if obj["competitor"] != "iperf3" {
		t.Errorf("JSON competitor: %v", obj["competitor"])
	}
	if _, ok := obj["competitor_note"]; ok {
		t.Errorf("JSON has a competitor_note without a fallback: %v", obj["competitor_note"])
	}
	r0 := obj["results"].([]any)[0].(map[string]any)
	for _, k := range []string{"system", "phase", "size", "goodput_bps"} {
		if _, ok := r0[k]; !ok {
			t.Errorf("result lacks %q", k)
		}
	}
	if strings.Contains(string(b), "duration\"") {
		t.Errorf("an unexported field leaked into the JSON: %s", b)
	}
}

// TestChooseCompetitor: iperf3 when asked for or by default when it is on
// PATH; the Go stream when asked for, or with a note when iperf3 is
// missing; iperf3 asked for when missing and unknown names are errors.
func TestChooseCompetitor(t *testing.T) {
	_, lookErr := exec.LookPath("iperf3")
	for _, asked := range []string{"", "iperf3", "go", "netperf"} {
		p := Plan{Competitor: asked}
		err := p.ChooseCompetitor()
		switch {
		case asked == "netperf":
			if err == nil || !strings.Contains(err.Error(), `tool "netperf": allowed iperf3, go`) {
				t.Errorf("netperf: %v", err)
			}
		case asked == "go":
			if err != nil || p.Competitor != "go" || p.CompetitorNote != "" {
				t.Errorf("go: %+v, %v", p, err)
			}
		case lookErr == nil:
			if err != nil || p.Competitor != "iperf3" || p.CompetitorNote != "" {
				t.Errorf("%q with iperf3 on PATH: %+v, %v", asked, p, err)
			}
		case asked == "":
			if err != nil || p.Competitor != "go" || !strings.Contains(p.CompetitorNote, "iperf3 not found") {
				t.Errorf("default without iperf3: %+v, %v", p, err)
			}
		default:
			if !errors.Is(err, lab.ErrNoIperf3) {
				t.Errorf("iperf3 asked for while missing: %v", err)
			}
		}
	}
	// Without iperf3 on PATH (an empty PATH), the default falls back.
	t.Setenv("PATH", t.TempDir())
	p := Plan{}
	if err := p.ChooseCompetitor(); err != nil || p.Competitor != "go" || !strings.Contains(p.CompetitorNote, "the competing stream is the Go stream: lab: iperf3 not found in PATH") {
		t.Errorf("default without iperf3: %+v, %v", p, err)
	}
	rep := NewReport(Plan{Rates: []float64{1e8}, Competitor: p.Competitor, CompetitorNote: p.CompetitorNote}, "cubic")
	if b, _ := json.Marshal(rep); !strings.Contains(string(b), `"competitor":"go","competitor_note":"the competing stream is the Go stream`) {
		t.Errorf("JSON of a fallback: %s", b)
	}
	p = Plan{Competitor: "iperf3"}
	if err := p.ChooseCompetitor(); !errors.Is(err, lab.ErrNoIperf3) || !strings.Contains(err.Error(), "lab bench: competing stream: lab: iperf3 not found in PATH") {
		t.Errorf("iperf3 asked for while missing: %v", err)
	}
}

// TestReportCPUPerGB: the machine's busy CPU time in each phase's window
// (from samples around the run) per GB delivered in that window; no
// figure without samples covering the window or without an epoch.
func TestReportCPUPerGB(t *testing.T) {
	p := Plan{Rates: []float64{200e6, 100e6}, Sizes: []int{1 << 20}, Systems: []string{"multirail-qlearn"}, Duration: 8 * time.Second}
	rep := NewReport(p, "cubic")
	run := fakeRun("multirail-qlearn") // 200 Mbit/s static, 150 dynamic
	run.Epoch = time.Unix(5000, 0)
	// 0.5 CPU busy until the middle of the run, 1.5 CPUs after it.
	for ms := -1000; ms <= 9000; ms += 100 {
		at := run.Epoch.Add(time.Duration(ms) * time.Millisecond)
		s := 0.5 * float64(ms) / 1000
		if ms > 4000 {
			s = 2 + 1.5*float64(ms-4000)/1000
		}
		run.CPU = append(run.CPU, lab.CPUSample{At: at, Busy: time.Duration(s * float64(time.Second))})
	}
	rep.Add(run, nil)
	st, dy := rep.Results[0], rep.Results[1]
	if st.CPUsPerGB == nil || dy.CPUsPerGB == nil {
		t.Fatalf("no CPU figure: static %v, dynamic %v", st.CPUsPerGB, dy.CPUsPerGB)
	}
	// 0.5 CPU-s per s at 25 MB/s: 20 s/GB; 1.5 at 18.75 MB/s: 80 s/GB.
	if math.Abs(*st.CPUsPerGB-20) > 0.01 || math.Abs(*dy.CPUsPerGB-80) > 0.01 {
		t.Errorf("CPU s/GB: static %.3f (want 20), dynamic %.3f (want 80)", *st.CPUsPerGB, *dy.CPUsPerGB)
	}
	short := run
	short.CPU = run.CPU[:30] // ends before the static window does
	noEpoch := run
	noEpoch.Epoch = time.Time{}
	rep.Add(short, nil)
	rep.Add(noEpoch, nil)
	for _, r := range rep.Results[2:] {
		if r.CPUsPerGB != nil {
			t.Errorf("%s phase: a CPU figure (%.2f) without samples covering it", r.Phase, *r.CPUsPerGB)
		}
	}
}
