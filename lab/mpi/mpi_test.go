package mpi

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Event
		err  error // nil, ErrNoEvent, or errAny
	}{
		{"MRBW start 1700000000.250000", Event{Kind: "start", Time: time.Unix(1700000000, 250000000)}, nil},
		{"MRBW win 1700000001.5 16777216", Event{Kind: "win", Time: time.Unix(1700000001, 500000000), Bytes: 16777216}, nil},
		{"MRBW done 10 167772160 4.016843", Event{Kind: "done", Windows: 10, Bytes: 167772160, Seconds: 4.016843}, nil},
		{"[mrA:01234] some Open MPI warning", Event{}, ErrNoEvent},
		{"", Event{}, ErrNoEvent},
		{"MRBW win 1700000001.5", Event{}, errAny},
		{"MRBW win x 12", Event{}, errAny},
		{"MRBW done 1 2", Event{}, errAny},
		{"MRBW what 1 2", Event{}, errAny},
	} {
		got, err := ParseLine(tc.line)
		switch {
		case tc.err == nil && err != nil:
			t.Errorf("%q: %v", tc.line, err)
		case tc.err == ErrNoEvent && !errors.Is(err, ErrNoEvent):
			t.Errorf("%q: err %v, want ErrNoEvent", tc.line, err)
		case tc.err == errAny && (err == nil || errors.Is(err, ErrNoEvent)):
			t.Errorf("%q: err %v, want a malformed-line error", tc.line, err)
		case tc.err == nil:
			if got.Kind != tc.want.Kind || got.Bytes != tc.want.Bytes || got.Windows != tc.want.Windows || got.Seconds != tc.want.Seconds ||
				got.Time.Sub(tc.want.Time).Abs() > time.Microsecond {
				t.Errorf("%q: %+v, want %+v", tc.line, got, tc.want)
			}
		}
	}
}

var errAny = errors.New("any error")

func TestScan(t *testing.T) {
	in := "noise\nMRBW start 100.0\nMRBW win 100.5 10\nMRBW win 101.0 10\nMRBW done 2 20 1.0\n"
	var kinds, other []string
	if err := Scan(strings.NewReader(in), func(e Event) { kinds = append(kinds, e.Kind) }, func(l string) { other = append(other, l) }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kinds, []string{"start", "win", "win", "done"}) || !slices.Equal(other, []string{"noise"}) {
		t.Errorf("kinds %v, other %v", kinds, other)
	}
}

func TestSpread(t *testing.T) {
	epoch := time.Unix(1000, 0)
	w := 250 * time.Millisecond
	at := func(d time.Duration) time.Time { return epoch.Add(d) }
	for _, tc := range []struct {
		name string
		wins []Event
		n    int
		want []int64
	}{
		{"one window over two buckets", []Event{{Kind: "win", Time: at(500 * time.Millisecond), Bytes: 1000}}, 4, []int64{500, 500, 0, 0}},
		{"windows inside buckets", []Event{{Time: at(100 * time.Millisecond), Bytes: 100}, {Time: at(200 * time.Millisecond), Bytes: 100}}, 2, []int64{200, 0}},
		{"uneven", []Event{{Time: at(375 * time.Millisecond), Bytes: 300}}, 2, []int64{200, 100}},
		{"past the end is dropped", []Event{{Time: at(time.Second), Bytes: 400}}, 2, []int64{100, 100}},
	} {
		if got := Spread(epoch, tc.wins, w, tc.n); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestArgs(t *testing.T) {
	j := Job{
		Hosts: [2]string{"mrA", "mrB"}, RshAgent: "/usr/bin/multirail lab rsh", OOBNet: "10.10.99.0/24",
		RailNets: []string{"10.10.1.0/24", "10.10.2.0/24"}, RailDevs: []string{"rail0", "rail1"},
		Program: "/cache/mrbw", Size: 65536, Seconds: 20, Window: 128,
	}
	def := strings.Join(Args(j), " ")
	for _, want := range []string{
		"mpirun -np 2 --host mrA:1,mrB:1 --bind-to none",
		"--mca plm_rsh_agent /usr/bin/multirail lab rsh",
		"--mca oob_tcp_if_include 10.10.99.0/24",
		"--mca pml ob1 --mca btl tcp,self",
		"--mca btl_tcp_if_include 10.10.1.0/24,10.10.2.0/24",
	} {
		if !strings.Contains(def, want) {
			t.Errorf("args lack %q: %s", want, def)
		}
	}
	if !strings.HasSuffix(def, "/cache/mrbw 65536 20 128") || strings.Contains(def, "btl_tcp_bandwidth") {
		t.Errorf("default weights: %s", def)
	}
	j.BandwidthMbps = []int{200, 100}
	w := strings.Join(Args(j), " ")
	if !strings.Contains(w, "--mca btl_tcp_bandwidth_rail0 200 --mca btl_tcp_bandwidth_rail1 100") {
		t.Errorf("weighted: %s", w)
	}
	if a := Args(j); a[slices.Index(a, "plm_rsh_agent")+1] != "/usr/bin/multirail lab rsh" {
		t.Error("the rsh agent must be one argument")
	}
	env := strings.Join(Env(), " ")
	if !strings.Contains(env, "OMPI_ALLOW_RUN_AS_ROOT=1") || !strings.Contains(env, "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1") {
		t.Errorf("env %v", Env())
	}
}

// TestBuild compiles mrbw and runs it with two local ranks (no lab).
func TestBuild(t *testing.T) {
	if err := Available(); err != nil {
		t.Skip(err.Error())
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin, err := Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := Build(ctx, dir); err != nil || again != bin {
		t.Fatalf("second Build: %q, %v; want the cached %q", again, err, bin)
	}
	if filepath.Dir(bin) != dir {
		t.Errorf("binary %s not in %s", bin, dir)
	}
	cmd := exec.CommandContext(ctx, "mpirun", "-np", "2", "--oversubscribe", "--mca", "btl", "self,tcp", "--mca", "pml", "ob1", bin, "65536", "0.3", "4")
	cmd.Env = append(os.Environ(), Env()...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Skipf("mpirun could not run two local ranks here (%v): %s", err, out.String())
	}
	var kinds []string
	var bytesWin int64
	if err := Scan(&out, func(e Event) {
		kinds = append(kinds, e.Kind)
		if e.Kind == "win" {
			bytesWin += e.Bytes
		}
	}, nil); err != nil {
		t.Fatal(err)
	}
	if len(kinds) < 3 || kinds[0] != "start" || kinds[len(kinds)-1] != "done" || bytesWin == 0 {
		t.Errorf("events %v, %d bytes in windows", kinds, bytesWin)
	}
}
