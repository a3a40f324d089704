package sender

import (
	"math"
	"testing"

	"pgregory.net/rapid"
)

// TestConfirmedModel: rails of one connection whose two ways have equal
// base delays (b[i], different per rail), the peer's clock offset off from
// the sender's, and segments that queue on the way there (q), wait at the
// peer before they are acknowledged (h: a delayed or lazy ACK) and queue
// on the way back (w). Once every rail has had a segment with no queueing
// on the way there, and rail 0 one with no wait at all (a clean round
// trip), Confirmed times each segment at its arrival on the sender's
// clock plus the rail's base way back, whatever h and w were: the offset
// comes from rail 0 (the highest OffsetBound), also for the rails whose round trips all waited.
func TestConfirmedModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 4).Draw(t, "rails")
		off := rapid.Int64Range(-1e15, 1e15).Draw(t, "offset")
		rails := make([]*Rail[int], n)
		base := make([]int64, n)
		lastArr := make([]int64, n) // on the peer's clock
		for i := range rails {
			r, err := New[int](Config{Pipe: 1})
			if err != nil {
				t.Fatal(err)
			}
			rails[i] = r
			base[i] = rapid.Int64Range(1e3, 50e6).Draw(t, "base")
			lastArr[i] = math.MinInt64
		}
		var now int64 = 1e9
		// send takes a segment on rail i at now and acknowledges it; it
		// returns what the model says and what Confirmed says (-1 before
		// the rails have their minima).
		send := func(i int, q, h, w int64) (want, got int64) {
			r := rails[i]
			now += rapid.Int64Range(0, 1e6).Draw(t, "gap")
			sent := now
			r.Push(sent, 0, 100)
			r.Take(sent)
			arr := max(sent+base[i]+q+off, lastArr[i]) // arrival times never go back
			lastArr[i] = arr
			ackAt := arr - off + h + base[i] + w
			now = max(now, ackAt)
			got = -1
			if fwd, _, ok := r.Minima(); ok {
				o, _ := r.OffsetBound()
				for _, x := range rails {
					if b, ok := x.OffsetBound(); ok {
						o = max(o, b)
					}
				}
				got = Confirmed(arr, sent, now, fwd, o)
			}
			if _, err := r.AckArrived(now, r.Acked()+1, arr, nil); err != nil {
				t.Fatal(err)
			}
			return min(max(arr-off+base[i], sent), now), got
		}
		// A clean round trip on rail 0, a clean way there on every rail.
		send(0, 0, 0, 0)
		for i := 1; i < n; i++ {
			send(i, 0, rapid.Int64Range(0, 5e6).Draw(t, "hold"), rapid.Int64Range(0, 5e6).Draw(t, "back"))
		}
		for range rapid.IntRange(1, 30).Draw(t, "segments") {
			i := rapid.IntRange(0, n-1).Draw(t, "rail")
			q := rapid.Int64Range(0, 20e6).Draw(t, "queued")
			h := rapid.Int64Range(0, 5e6).Draw(t, "hold")
			w := rapid.Int64Range(0, 20e6).Draw(t, "back")
			want, got := send(i, q, h, w)
			if got != want {
				t.Fatalf("rail %d (base %d): Confirmed = %d, want %d (arrival plus the base way back)", i, base[i], got, want)
			}
		}
	})
}

// TestConfirmedUnknown: without minima from stamped acknowledgements a
// rail reports none (Minima and OffsetBound false).
func TestConfirmedUnknown(t *testing.T) {
	r, err := New[int](Config{Pipe: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := r.Minima(); ok {
		t.Error("Minima before any acknowledgement: ok")
	}
	r.Push(0, 0, 100)
	r.Take(0)
	if _, err := r.AckTo(10, 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := r.Minima(); ok {
		t.Error("Minima after an acknowledgement without an arrival time: ok")
	}
	if _, ok := r.OffsetBound(); ok {
		t.Error("OffsetBound after an acknowledgement without an arrival time: ok")
	}
	if got := Confirmed(100, 50, 90, 0, 0); got != 90 {
		t.Errorf("Confirmed after now: %d, want now (90)", got)
	}
	if got := Confirmed(10, 50, 90, 0, 0); got != 50 {
		t.Errorf("Confirmed before sent: %d, want sent (50)", got)
	}
}
