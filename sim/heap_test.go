package sim

import (
	"math/rand/v2"
	"sort"
	"testing"

	"pgregory.net/rapid"
)

// refQueue is the reference for eventHeap: pending events in a slice,
// sorted by (time, push order) on every pop.
type refQueue struct {
	ev  []refEvent
	seq int32
}

type refEvent struct {
	t   int64
	seq int32 // push order; also the event's argument
}

func (r *refQueue) push(t int64) int32 {
	r.ev = append(r.ev, refEvent{t, r.seq})
	r.seq++
	return r.seq - 1
}

func (r *refQueue) sort() {
	sort.Slice(r.ev, func(i, j int) bool {
		a, b := r.ev[i], r.ev[j]
		return a.t < b.t || (a.t == b.t && a.seq < b.seq)
	})
}

func (r *refQueue) pop() refEvent {
	r.sort()
	e := r.ev[0]
	r.ev = r.ev[1:]
	return e
}

// fataler is what checkPop needs of *testing.T and *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// checkPop pops from h and r and fails unless they agree.
func checkPop(t fataler, h *eventHeap, r *refQueue) int64 {
	t.Helper()
	e := h.pop()
	w := r.pop()
	if e.t != w.t || e.arg() != w.seq || e.kind() != evArrive {
		t.Fatalf("pop: got (t %d, #%d, kind %d), want (t %d, #%d, kind %d)", e.t, e.arg(), e.kind(), w.t, w.seq, evArrive)
	}
	if h.len() != len(r.ev) {
		t.Fatalf("len %d after pop, want %d", h.len(), len(r.ev))
	}
	return e.t
}

// TestHeapOrder: events come out by time, and in push order among equal
// times, for a long random monotone schedule with many equal times and
// up to a few thousand pending events.
func TestHeapOrder(t *testing.T) {
	var h eventHeap
	var r refQueue
	rng := rand.New(rand.NewPCG(1, 2))
	now := int64(0)
	for step := range 20000 {
		// Phases of growth and of draining, so that both large and
		// small buckets get split and sorted.
		grow := step/2500%2 == 0
		if len(r.ev) > 0 && rng.IntN(3) == 0 || !grow && len(r.ev) > 0 && rng.IntN(2) == 0 {
			now = checkPop(t, &h, &r)
			continue
		}
		var d int64
		switch rng.IntN(4) {
		case 0:
			d = int64(rng.IntN(20)) // many equal times
		case 1:
			d = int64(rng.IntN(1 << 12))
		case 2:
			d = int64(rng.IntN(1 << 20))
		default:
			d = rng.Int64N(1 << 40)
		}
		h.push(now+d, evArrive, r.push(now+d))
	}
	for len(r.ev) > 0 {
		checkPop(t, &h, &r)
	}
	if h.len() != 0 {
		t.Fatalf("%d events left", h.len())
	}
}

// TestHeapProp compares eventHeap with refQueue on random monotone
// schedules: single pushes, bursts of pushes (to fill buckets past
// runMax), pops and peeks, with times drawn at several scales including
// many equal ones.
func TestHeapProp(t *testing.T) {
	delay := rapid.OneOf(
		rapid.Just(int64(0)),
		rapid.Int64Range(0, 3),
		rapid.Int64Range(0, 1<<10),
		rapid.Int64Range(0, 1<<20),
		rapid.Int64Range(0, 1<<44),
	)
	rapid.Check(t, func(t *rapid.T) {
		var h eventHeap
		var r refQueue
		floor := int64(0) // the time last popped or peeked at
		if rapid.Bool().Draw(t, "late_start") {
			floor = rapid.Int64Range(0, 1<<62).Draw(t, "start")
		}
		push := func() {
			at := floor + delay.Draw(t, "delay")
			h.push(at, evArrive, r.push(at))
		}
		for range rapid.IntRange(0, 200).Draw(t, "ops") {
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case op < 4:
				push()
			case op < 5:
				for range rapid.IntRange(1, 3*runMax).Draw(t, "burst") {
					push()
				}
			case len(r.ev) == 0:
				if h.len() != 0 {
					t.Fatalf("len %d, want 0", h.len())
				}
			case op < 9:
				floor = checkPop(t, &h, &r)
			default:
				r.sort()
				if got := h.first(); got != r.ev[0].t {
					t.Fatalf("first: got %d, want %d", got, r.ev[0].t)
				}
				floor = r.ev[0].t
			}
		}
		for len(r.ev) > 0 {
			checkPop(t, &h, &r)
		}
		if h.len() != 0 {
			t.Fatalf("%d events left", h.len())
		}
	})
}

// TestHeapPast: a push before the time last popped panics rather than
// disorder the queue.
func TestHeapPast(t *testing.T) {
	var h eventHeap
	h.push(10, evTick, 0)
	h.pop()
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for an event in the past")
		}
	}()
	h.push(9, evTick, 0)
}

// TestHeapAllocs: once grown, the queue allocates nothing.
func TestHeapAllocs(t *testing.T) {
	var h eventHeap
	rng := rand.New(rand.NewPCG(3, 4))
	now := int64(0)
	cycle := func() {
		for range 1000 {
			h.push(now+rng.Int64N(1<<17), evArrive, 0)
		}
		for range 1000 {
			now = h.pop().t
		}
	}
	// A few events far apart, popped and pushed in turn, so that the
	// run takes every push.
	steady := func() {
		for range 1000 {
			now = h.pop().t
			h.push(now+1<<30+rng.Int64N(1<<20), evArrive, 0)
		}
	}
	for range 50 {
		cycle()
	}
	if a := testing.AllocsPerRun(20, cycle); a != 0 {
		t.Fatalf("%v allocations per cycle", a)
	}
	for range 10 {
		h.push(now+rng.Int64N(1<<30), evArrive, 0)
	}
	for range 20 {
		steady()
	}
	if a := testing.AllocsPerRun(20, steady); a != 0 {
		t.Fatalf("%v allocations per steady cycle", a)
	}
}
