package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/multirail/multirail/sched"
	"pgregory.net/rapid"
)

// genRail draws a small rail whose background load always leaves some
// capacity in the end, so that all traffic can complete.
func genRail(t *rapid.T, label string) Rail {
	r := Rail{
		RateBps: float64(rapid.IntRange(5, 100).Draw(t, label+"mbit")) * 1e6,
		Delay:   time.Duration(rapid.IntRange(0, 5000).Draw(t, label+"delay_us")) * time.Microsecond,
	}
	frac := func(name string) float64 { return float64(rapid.IntRange(0, 100).Draw(t, name)) / 100 }
	for i := range rapid.IntRange(0, 3).Draw(t, label+"loads") {
		l := fmt.Sprintf("%sload%d", label, i)
		switch rapid.SampledFrom(loadKinds).Draw(t, l+"kind") {
		case LoadStep:
			at := time.Duration(rapid.IntRange(0, 500).Draw(t, l+"at_ms")) * time.Millisecond
			r.Load = append(r.Load, Load{Kind: LoadStep, At: at, Fraction: frac(l + "f")},
				Load{Kind: LoadStep, At: at + time.Duration(rapid.IntRange(1, 300).Draw(t, l+"len_ms"))*time.Millisecond, Fraction: frac(l+"f2") * 0.3})
		case LoadOnOff:
			r.Load = append(r.Load, Load{Kind: LoadOnOff, Period: time.Duration(rapid.IntRange(1, 200).Draw(t, l+"period_ms")) * time.Millisecond,
				Duty: frac(l+"duty") * 0.95, Fraction: frac(l + "f"), Start: time.Duration(rapid.IntRange(0, 100).Draw(t, l+"start_ms")) * time.Millisecond})
		case LoadPoisson:
			r.Load = append(r.Load, Load{Kind: LoadPoisson, Gap: time.Duration(rapid.IntRange(10, 100).Draw(t, l+"gap_ms")) * time.Millisecond,
				Length: time.Duration(rapid.IntRange(1, 50).Draw(t, l+"length_ms")) * time.Millisecond, Fraction: frac(l + "f")})
		case LoadTrace:
			var pts []TracePoint
			at := time.Duration(0)
			for j := range rapid.IntRange(1, 4).Draw(t, l+"points") {
				at += time.Duration(rapid.IntRange(0, 200).Draw(t, fmt.Sprintf("%sdt%d", l, j))) * time.Millisecond
				pts = append(pts, TracePoint{At: at, Fraction: frac(fmt.Sprintf("%sf%d", l, j))})
			}
			pts = append(pts, TracePoint{At: at + time.Millisecond, Fraction: 0.3})
			r.Load = append(r.Load, Load{Kind: LoadTrace, Points: pts})
		}
	}
	return r
}

// TestPropertyEverythingArrivesOnce: in random small scenarios every
// segment is delivered exactly once and every message completes, with
// every scheduler, whatever the load and the dispatch mode.
func TestPropertyEverythingArrivesOnce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sc := &Scenario{
			Seed:        rapid.Uint64().Draw(t, "seed"),
			SegmentSize: rapid.IntRange(512, 8192).Draw(t, "segment_size"),
			QueueDepth:  rapid.IntRange(1, 8).Draw(t, "queue_depth"),
		}
		switch rapid.IntRange(0, 2).Draw(t, "eager") {
		case 1:
			sc.EagerLimit = -1
		case 2:
			sc.EagerLimit = rapid.IntRange(1, sc.SegmentSize).Draw(t, "eager_limit")
		}
		if rapid.Bool().Draw(t, "timer") {
			sc.DispatchInterval = time.Duration(rapid.IntRange(10, 50).Draw(t, "dispatch_ms")) * time.Millisecond
		}
		sc.KnownBandwidths = rapid.Bool().Draw(t, "known")
		for i := range rapid.IntRange(1, 4).Draw(t, "rails") {
			sc.Rails = append(sc.Rails, genRail(t, fmt.Sprintf("r%d", i)))
		}
		count := int64(rapid.IntRange(1, 30).Draw(t, "count"))
		size := func(name string) int64 { return int64(rapid.IntRange(1, 100000).Draw(t, name)) }
		want := count
		switch kind := rapid.SampledFrom(trafficKinds).Draw(t, "kind"); kind {
		case KindBulk:
			sc.Traffic = Traffic{Kind: kind, Size: size("size"), Window: rapid.IntRange(1, 8).Draw(t, "window"), Count: count}
		case KindMixed:
			sc.Traffic = Traffic{Kind: kind, Count: count}
			for i := range rapid.IntRange(1, 3).Draw(t, "sizes") {
				sc.Traffic.Sizes = append(sc.Traffic.Sizes, SizeWeight{Size: size(fmt.Sprintf("size%d", i)), Weight: float64(rapid.IntRange(1, 5).Draw(t, fmt.Sprintf("weight%d", i)))})
			}
			if rapid.Bool().Draw(t, "poisson") {
				sc.Traffic.Load = float64(rapid.IntRange(1, 150).Draw(t, "load_pct")) / 100
			}
		case KindReqResp:
			sc.Traffic = Traffic{Kind: kind, Request: size("request"), Response: size("response"), Window: rapid.IntRange(1, 4).Draw(t, "window"), Count: count}
			if rapid.Bool().Draw(t, "reverse") {
				sc.Traffic.ReverseRails = []Rail{genRail(t, "rev")}
			}
		case KindAllreduce:
			n := rapid.IntRange(2, 6).Draw(t, "ranks")
			sc.Traffic = Traffic{Kind: kind, Ranks: n, Size: int64(n) * size("chunk"), Iterations: rapid.IntRange(1, 2).Draw(t, "iterations"),
				RailsMin: rapid.IntRange(1, len(sc.Rails)).Draw(t, "rails_min"), RateJitter: float64(rapid.IntRange(0, 50).Draw(t, "jitter_pct")) / 100}
			want = int64(sc.Traffic.Iterations)
		}
		name := rapid.SampledFrom(sched.Names()).Draw(t, "sched")
		s, err := New(sc, name)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		r := s.Run()
		if !s.done || r.Completed != want {
			t.Fatalf("completed %d of %d (done %v) by %v", r.Completed, want, s.done, s.Now())
		}
		if r.SegmentsSent != r.SegmentsDelivered || r.OfferedBytes != r.DeliveredBytes || s.bugs != 0 {
			t.Fatalf("segments sent %d delivered %d, bytes offered %d delivered %d, over-deliveries %d",
				r.SegmentsSent, r.SegmentsDelivered, r.OfferedBytes, r.DeliveredBytes, s.bugs)
		}
		// A segment whose ack to the sender is still on its way when the
		// last message completes is not back in the pool yet.
		if len(s.freeSeg)+s.acking != len(s.segs) || len(s.freeMsg) != len(s.msgs) {
			t.Fatalf("%d of %d segments (%d awaiting their ack) and %d of %d messages not returned to their pools",
				len(s.segs)-len(s.freeSeg), len(s.segs), s.acking, len(s.msgs)-len(s.freeMsg), len(s.msgs))
		}
		for li := range s.links {
			L := &s.links[li]
			if L.busy != 0 || L.lanes[0].head >= 0 || L.lanes[1].head >= 0 || L.lanes[0].pending.Len() != 0 || L.lanes[1].pending.Len() != 0 {
				t.Fatalf("link %d ends with %d segments in flight, messages pending: %+v", li, L.busy, L.lanes)
			}
			for i, st := range L.states {
				if st.Queued != 0 || st.QueuedBytes != 0 {
					t.Fatalf("link %d rail %d ends with %d queued (%d bytes)", li, i, st.Queued, st.QueuedBytes)
				}
			}
		}
		var shares float64
		for _, rr := range r.Rails {
			shares += rr.Share
		}
		if shares < 0.999999 || shares > 1.000001 {
			t.Fatalf("rail shares add up to %v", shares)
		}
	})
}
