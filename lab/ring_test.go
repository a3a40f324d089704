package lab

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

func TestRingResultSums(t *testing.T) {
	r := RingResult{Hosts: 3, Rails: 2, Flows: []RingFlow{
		{From: 0, To: 1, Rail: 0, Bytes: 1000, Seconds: 2}, {From: 0, To: 1, Rail: 1, Bytes: 500, Seconds: 2},
		{From: 1, To: 2, Rail: 0, Bytes: 2000, Seconds: 2}, {From: 1, To: 2, Rail: 1, Bytes: 0, Seconds: 2},
		{From: 2, To: 0, Rail: 0, Bytes: 250, Seconds: 1}, {From: 2, To: 0, Rail: 1, Bytes: 9, Seconds: 0},
	}}
	h := r.HostBps()
	if len(h) != 3 || h[0] != 6000 || h[1] != 8000 || h[2] != 2000 {
		t.Errorf("per host %v, want [6000 8000 2000] (a flow without a time counts 0)", h)
	}
	if m := r.MeanHostBps(); m != 16000.0/3 {
		t.Errorf("mean %v", m)
	}
	if b := r.Bytes(); b != 3759 {
		t.Errorf("bytes %d", b)
	}
	if (RingResult{}).MeanHostBps() != 0 {
		t.Error("an empty ring has a goodput")
	}
}

func TestParseIperfReceivedSeconds(t *testing.T) {
	r, err := ParseIperf([]byte(`{"start":{"version":"iperf 3.12"},"intervals":[],"end":{"sum_received":{"start":0,"end":2.5,"bytes":1000}}}`))
	if err != nil || r.ReceivedBytes != 1000 || r.ReceivedSeconds != 2.5 {
		t.Fatalf("%+v, %v", r, err)
	}
}

// TestRing runs a ring of iperf3 flows on a cluster of three hosts with
// two rails: every host sends to the next on both, and each gets some of
// its rails and no more than they carry.
func TestRing(t *testing.T) {
	needLab(t)
	unavailable := t.Skipf
	if os.Getenv("CI") == "true" {
		unavailable = t.Fatalf
	}
	if err := Iperf3Available(); err != nil {
		unavailable("%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := testConfig(t, 20e6, 10e6)
	cfg.Hosts = 3
	l, err := Up(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Down()
	if _, err := l.Ring(ctx, 1500*time.Millisecond); !errors.Is(err, ErrRing) {
		t.Errorf("1.5 s: want ErrRing (iperf3 sends whole seconds), got %v", err)
	}
	r, err := l.Ring(ctx, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Flows) != 6 || !r.End.After(r.Start) {
		t.Fatalf("%d flows, window %v..%v: %+v", len(r.Flows), r.Start, r.End, r.Flows)
	}
	ceil := GoodputCeiling(30e6)
	for i, bps := range r.HostBps() {
		// Loose: a check that the flows ran on the rails, not a measurement.
		if bps <= 0 || bps > 1.1*ceil {
			t.Errorf("host %d: %.2f Mbit/s; want some, at most the rails' %.2f", i, bps/1e6, ceil/1e6)
		}
	}
	for _, f := range r.Flows {
		if f.To != (f.From+1)%3 || f.Bytes <= 0 {
			t.Errorf("flow %+v", f)
		}
	}
	t.Logf("per host %.2f Mbit/s (ceiling %.2f)", r.MeanHostBps()/1e6, ceil/1e6)
}
