package bench

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/multirail/multirail/emu"
)

func newTCPPath(t *testing.T, spec emu.Spec, size int) *TCPPath {
	t.Helper()
	p, err := NewTCPPath(context.Background(), spec, size, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestTCPPath: every byte a slice writes is read before the slice ends,
// the slices add up, Warmup forgets what it measured, and a closed path
// fails instead of hanging.
func TestTCPPath(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := newTCPPath(t, emu.Spec{Kind: emu.KindLoop}, 64<<10)
	if err := p.Warmup(ctx, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if p.written != 0 || p.took != 0 || p.streams != 0 || len(p.rtts) != 0 {
		t.Fatalf("after Warmup: written %d, took %v, %d streams, %d round trips", p.written, p.took, p.streams, len(p.rtts))
	}
	var before int64
	for i := 0; i < 2; i++ {
		p.read.mu.Lock()
		before = p.read.n
		p.read.mu.Unlock()
		w0 := p.written
		if err := p.Stream(ctx, 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		p.read.mu.Lock()
		read := p.read.n - before
		p.read.mu.Unlock()
		if wrote := p.written - w0; wrote == 0 || read != wrote {
			t.Fatalf("slice %d: wrote %d bytes, the reader had read %d when it ended", i, wrote, read)
		}
	}
	if err := p.Ping(ctx, 50); err != nil || len(p.rtts) != 50 {
		t.Fatalf("Ping: %d round trips, %v", len(p.rtts), err)
	}
	b := p.Result()
	if want := float64(p.written) * 8 / p.took.Seconds(); b.GoodputBps != want || b.LatencyP50 <= 0 {
		t.Fatalf("Result %+v; want goodput %v and a round trip", b, want)
	}
	p.Close()
	if err := p.Stream(ctx, 10*time.Millisecond); err == nil {
		t.Fatal("Stream on a closed path: no error")
	}
}

func TestNewTCPPathRefusesSize(t *testing.T) {
	if _, err := NewTCPPath(context.Background(), emu.Spec{Kind: emu.KindLoop}, 0, false); err == nil {
		t.Fatal("size 0 accepted")
	}
}

// TestRunTakesTurnsWithBaseline: with a baseline, a run is cut into
// slices taken in turns with the plain TCP stream, counts every message it
// sent (all have arrived when a slice ends), and takes the round trips in
// blocks; with loads it runs in one piece and leaves the baseline alone.
func TestRunTakesTurnsWithBaseline(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for a few seconds")
	}
	spec := emu.Spec{Kind: emu.KindEmu, RateBps: 200e6}
	const size = 64 << 10
	tcp := newTCPPath(t, spec, size)
	r, err := Run(context.Background(), Options{Rails: []emu.Spec{spec}, Sched: "qlearn", Size: size, Duration: 500 * time.Millisecond, RTT: true, Baseline: tcp})
	if err != nil {
		t.Fatal(err)
	}
	if tcp.streams != baselineSlices || tcp.written == 0 {
		t.Fatalf("baseline: %d slices, %d bytes; want %d slices", tcp.streams, tcp.written, baselineSlices)
	}
	if len(tcp.rtts) != rttRounds || r.RTTP50 <= 0 {
		t.Fatalf("baseline round trips %d (want %d), multirail's median %v", len(tcp.rtts), rttRounds, r.RTTP50)
	}
	bytes := r.GoodputBps * r.DurationS / 8
	if r.Messages == 0 || math.Abs(bytes-float64(r.Messages*size)) > 1e-6*bytes {
		t.Fatalf("%d messages of %d bytes, but %.0f bytes counted", r.Messages, size, bytes)
	}

	loaded := newTCPPath(t, spec, size)
	_, err = Run(context.Background(), Options{Rails: []emu.Spec{spec}, Sched: "qlearn", Size: size, Duration: 300 * time.Millisecond,
		Loads: []emu.Load{{Rail: 0, Fraction: 0.5, At: 100 * time.Millisecond}}, Baseline: loaded})
	if err != nil {
		t.Fatal(err)
	}
	if loaded.streams != 0 {
		t.Fatalf("a run with loads took %d baseline slices", loaded.streams)
	}
}
