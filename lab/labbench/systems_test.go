package labbench

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/multirail/multirail/sched"
)

func TestExpand(t *testing.T) {
	all := sched.Names()
	nS := len(all)
	noMPI := errors.New("mpi: mpicc and mpirun not found")
	noTorch := errors.New("gloo: no torch")
	noBackend := errors.New("torch-multirail: no multirail.torch")
	for _, tc := range []struct {
		systems        string
		scheds         []string
		mpiErr         error
		coll           bool
		glooErr        error
		torchErr       error
		want           []string // nil: just check the count
		count, skipped int
		err            error
	}{
		{systems: "all", scheds: all, count: 4 + nS},
		{systems: "all", scheds: all, mpiErr: noMPI, count: 2 + nS, skipped: 2},
		{systems: "tcp-per-rail,mptcp,tcp-per-rail", scheds: all, want: []string{"tcp-per-rail", "mptcp"}},
		{systems: "multirail", scheds: []string{"roundrobin", "qlearn"}, want: []string{"multirail-roundrobin", "multirail-qlearn"}},
		{systems: "multirail-weighted,openmpi", scheds: all, want: []string{"multirail-weighted", "openmpi-default", "openmpi-weighted"}},
		{systems: "openmpi", scheds: all, mpiErr: noMPI, err: ErrUnavailable},
		{systems: "openmpi-weighted", scheds: all, mpiErr: noMPI, err: ErrUnavailable},
		{systems: "mptcp,all", scheds: []string{"qlearn"}, mpiErr: noMPI, want: []string{"mptcp", "tcp-per-rail", "multirail-qlearn"}, skipped: 2},
		{systems: "infiniband", scheds: all, err: ErrUnknownSystem},
		{systems: "multirail-fastest", scheds: all, err: ErrUnknownSystem},
		// gloo and torch-multirail: all brings them in for the collective
		// bench only; without torch, the backend or Open MPI they are
		// skipped, or an error when named.
		{systems: "all", scheds: []string{"qlearn"}, coll: true, want: []string{"tcp-per-rail", "mptcp", "openmpi-default", "openmpi-weighted", "iperf3-ring", "gloo", "torch-multirail", "multirail-qlearn"}},
		{systems: "all", scheds: []string{"qlearn"}, coll: true, glooErr: noTorch, want: []string{"tcp-per-rail", "mptcp", "openmpi-default", "openmpi-weighted", "iperf3-ring", "torch-multirail", "multirail-qlearn"}, skipped: 1},
		{systems: "all", scheds: []string{"qlearn"}, coll: true, torchErr: noBackend, want: []string{"tcp-per-rail", "mptcp", "openmpi-default", "openmpi-weighted", "iperf3-ring", "gloo", "multirail-qlearn"}, skipped: 1},
		{systems: "all", scheds: []string{"qlearn"}, coll: true, mpiErr: noMPI, want: []string{"tcp-per-rail", "mptcp", "iperf3-ring", "multirail-qlearn"}, skipped: 4},
		{systems: "torch", scheds: all, coll: true, want: []string{"gloo", "torch-multirail", "torch-multirail-plaintext"}},
		{systems: "torch", scheds: all, coll: true, torchErr: noBackend, want: []string{"gloo"}, skipped: 2},
		{systems: "torch-multirail-plaintext,multirail-qlearn-plaintext,multirail-qlearn", scheds: all, coll: true,
			want: []string{"torch-multirail-plaintext", "multirail-qlearn-plaintext", "multirail-qlearn"}},
		{systems: "torch-multirail", scheds: all, coll: true, torchErr: noBackend, err: ErrUnavailable},
		{systems: "torch-multirail-plaintext", scheds: all, coll: true, mpiErr: noMPI, err: ErrUnavailable},
		{systems: "multirail-fastest-plaintext", scheds: all, coll: true, err: ErrUnknownSystem},
		{systems: "torch-multirail-sealed", scheds: all, coll: true, err: ErrUnknownSystem},
		{systems: "gloo,openmpi-weighted", scheds: all, coll: true, want: []string{"gloo", "openmpi-weighted"}},
		{systems: "gloo", scheds: all, want: []string{"gloo"}},
		{systems: "gloo", scheds: all, coll: true, glooErr: noTorch, err: ErrUnavailable},
		{systems: "gloo", scheds: all, coll: true, mpiErr: noMPI, err: ErrUnavailable},
	} {
		o := ExpandOptions{Scheds: tc.scheds, MPI: tc.mpiErr, Coll: tc.coll}
		calls := 0
		o.Gloo = func() error { calls++; return tc.glooErr }
		torchCalls := 0
		o.TorchMultirail = func() error { torchCalls++; return tc.torchErr }
		got, skipped, err := Expand(strings.Split(tc.systems, ","), o)
		name := fmt.Sprintf("%s (coll %v)", tc.systems, tc.coll)
		bringsTorch := tc.coll && tc.systems == "all" || tc.systems == "torch"
		if calls > 1 || (calls == 1) != (tc.mpiErr == nil && (bringsTorch || strings.Contains(tc.systems, "gloo"))) {
			t.Errorf("%s: gloo checked %d times", name, calls)
		}
		if torchCalls > 1 || (torchCalls == 1) != (tc.mpiErr == nil && (bringsTorch || strings.Contains(tc.systems, "torch-multirail")) && tc.err != ErrUnknownSystem) {
			t.Errorf("%s: torch-multirail checked %d times", name, torchCalls)
		}
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("%s: err %v, want %v", name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if tc.want != nil && !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
		if tc.count > 0 && len(got) != tc.count {
			t.Errorf("%s: %d systems (%v), want %d", name, len(got), got, tc.count)
		}
		if len(skipped) != tc.skipped {
			t.Errorf("%s: skipped %v, want %d", name, skipped, tc.skipped)
		}
	}
	_, _, err := Expand([]string{"openmpi-weighted"}, ExpandOptions{MPI: noMPI})
	var ue *UnavailableError
	if !errors.As(err, &ue) || ue.System != "openmpi-weighted" || !errors.Is(err, noMPI) {
		t.Errorf("unavailable: %v", err)
	}
	_, _, err = Expand([]string{"gloo"}, ExpandOptions{Coll: true, Gloo: func() error { return noTorch }})
	if !errors.As(err, &ue) || ue.System != "gloo" || !errors.Is(err, noTorch) {
		t.Errorf("gloo unavailable: %v", err)
	}
	_, skipped, err := Expand([]string{"all"}, ExpandOptions{Coll: true, MPI: noMPI})
	if err != nil || len(skipped) != 4 || skipped[2].System != "gloo" || !strings.Contains(skipped[2].Reason, "gloo is started by Open MPI's mpirun: mpi: mpicc") ||
		skipped[3].System != "torch-multirail" || !strings.Contains(skipped[3].Reason, "torch-multirail is started by Open MPI's mpirun") {
		t.Errorf("gloo without Open MPI: %v, %v", skipped, err)
	}
	_, _, err = Expand([]string{"nccl"}, ExpandOptions{})
	var ke *UnknownSystemError
	if !errors.As(err, &ke) || ke.Item != "nccl" || !strings.Contains(err.Error(), "multirail-<sched>") {
		t.Errorf("unknown: %v", err)
	}
}

// TestLookup: every system Expand can return is behind the interface,
// named as asked; the notes say which were given the rail rates.
func TestLookup(t *testing.T) {
	names, _, err := Expand([]string{"all"}, ExpandOptions{Scheds: sched.Names()})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		s, err := Lookup(n)
		if err != nil || s.Name() != n {
			t.Errorf("Lookup(%q) = %v, %v", n, s, err)
			continue
		}
		wantNote := map[string]string{"multirail-weighted": "given the true rail rates", "openmpi-weighted": "btl_tcp_bandwidth_railN = rates"}[n]
		if s.Note() != wantNote || Note(n) != wantNote {
			t.Errorf("%s: note %q, want %q", n, s.Note(), wantNote)
		}
	}
	if _, err := Lookup("multirail-"); !errors.Is(err, ErrUnknownSystem) {
		t.Errorf("Lookup(multirail-): %v", err)
	}
}

func TestSystemKinds(t *testing.T) {
	for _, tc := range []struct {
		sys                                        string
		torch, plaintext, multirail, collOnly, mpi bool
		sched                                      string
	}{
		{sys: "gloo", torch: true, collOnly: true},
		{sys: "torch-multirail", torch: true, collOnly: true},
		{sys: "torch-multirail-plaintext", torch: true, plaintext: true, collOnly: true},
		{sys: "multirail-qlearn", multirail: true, sched: "qlearn"},
		{sys: "multirail-qlearn-plaintext", multirail: true, plaintext: true, collOnly: true, sched: "qlearn"},
		{sys: "multirail-roundrobin-plaintext", multirail: true, plaintext: true, collOnly: true, sched: "roundrobin"},
		{sys: "multirail-fastest-plaintext"},
		{sys: "multirail-"},
		{sys: "openmpi-default", mpi: true},
		{sys: "tcp-per-rail"},
	} {
		if IsTorch(tc.sys) != tc.torch || IsPlaintext(tc.sys) != tc.plaintext || IsMultirail(tc.sys) != tc.multirail ||
			IsCollOnly(tc.sys) != tc.collOnly || IsMPI(tc.sys) != tc.mpi || (tc.multirail && SchedOf(tc.sys) != tc.sched) {
			t.Errorf("%s: torch %v plaintext %v multirail %v coll-only %v mpi %v sched %q", tc.sys, IsTorch(tc.sys), IsPlaintext(tc.sys),
				IsMultirail(tc.sys), IsCollOnly(tc.sys), IsMPI(tc.sys), SchedOf(tc.sys))
		}
	}
	if !IsBaseline("gloo") || IsBaseline("torch-multirail") || IsBaseline("multirail-qlearn-plaintext") {
		t.Error("baselines: gloo and Open MPI's only")
	}
}

func TestPlanEstimate(t *testing.T) {
	p := Plan{Systems: []string{"tcp-per-rail", "openmpi-default"}, Sizes: []int{1, 2}, Duration: 10 * 1e9}
	if p.Runs() != 4 {
		t.Errorf("runs %d", p.Runs())
	}
	if got, want := p.Estimate().Seconds(), 2*(10+3+10+5)+5.0; got != want {
		t.Errorf("estimate %v s, want %v s", got, want)
	}
	st, dy := Phases(8e9)
	if st != [2]time.Duration{time.Second, 4 * time.Second} || dy != [2]time.Duration{5 * time.Second, 8 * time.Second} {
		t.Errorf("phases %v %v", st, dy)
	}
}
