package multirail

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/multirail/multirail/sched"
)

// testExplainer is the registry name of explainingSched, registered for the
// tests of this package only.
const testExplainer = "test-explainer"

func init() {
	sched.Register(testExplainer, func(cfg sched.Config) (sched.Scheduler, error) {
		return &explainingSched{perRail: make([]int, cfg.Rails)}, nil
	})
}

// explainingSched takes turns over the rails that are up and explains
// itself with made-up but checkable numbers: rail i is at level i+3 and
// its value is half the segments it was given; every fourth decision
// counts as an exploration.
type explainingSched struct {
	next    int
	picks   uint64
	perRail []int
}

func (s *explainingSched) Name() string { return testExplainer }

func (s *explainingSched) Pick(now int64, size int, rails []sched.RailState) int {
	for range rails {
		i := s.next % len(rails)
		s.next++
		if rails[i].Up {
			s.picks++
			s.perRail[i]++
			return i
		}
	}
	return -1
}

func (s *explainingSched) Departed(int64, int, int, int64, []sched.RailState) {}

func (s *explainingSched) Explain(x *sched.Explanation) {
	x.Levels = x.Levels[:0]
	x.Values = x.Values[:0]
	for i, n := range s.perRail {
		x.Levels = append(x.Levels, i+3)
		x.Values = append(x.Values, float64(n)/2)
	}
	x.Decisions, x.Explorations = s.picks, s.picks/4
}

// sendOne sends a message of n bytes from a and receives it on b.
func sendOne(t *testing.T, a, b *Conn, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- a.Send(ctx, 0, make([]byte, n)) }()
	if m, err := b.Recv(ctx); err != nil || len(m.Data) != n {
		t.Fatalf("Recv: %d bytes, %v", len(m.Data), err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestStatsRecentRoundRobin: the transport records the scheduler's choices
// itself: with roundrobin over two rails they alternate, and they agree
// with the segments each rail carried.
func TestStatsRecentRoundRobin(t *testing.T) {
	const seg = 4096
	a, b := pair(t, 2, Config{Scheduler: "roundrobin", SegmentSize: seg})
	alternates := func(st Stats) {
		t.Helper()
		rec := st.Scheduler.Recent
		for i := 1; i < len(rec); i++ {
			if rec[i] == rec[i-1] {
				t.Fatalf("roundrobin over 2 rails chose rail %d twice in a row: %v", rec[i], rec)
			}
		}
		if want := int((st.Scheduler.Decisions - 1) % 2); len(rec) > 0 && rec[len(rec)-1] != want {
			t.Fatalf("last choice %d, want %d after %d decisions", rec[len(rec)-1], want, st.Scheduler.Decisions)
		}
		for _, r := range st.Rails {
			if r.Level != -1 || r.Value != 0 {
				t.Fatalf("roundrobin explains nothing, yet rail %s has level %d value %v", r.Name, r.Level, r.Value)
			}
			if r.RecentShare != 0.5 {
				t.Fatalf("rail %s has %v of the recent choices, want 0.5", r.Name, r.RecentShare)
			}
		}
		if st.Scheduler.Explains || st.Scheduler.Explorations != 0 || st.Scheduler.Name != "roundrobin" {
			t.Fatalf("scheduler stats %+v", st.Scheduler)
		}
	}

	sendOne(t, a, b, 40*seg) // fewer choices than the ring holds
	st := a.Stats()
	if len(st.Scheduler.Recent) != 40 || st.Scheduler.Decisions != 40 {
		t.Fatalf("after 40 segments: %d recent choices, %d decisions", len(st.Scheduler.Recent), st.Scheduler.Decisions)
	}
	// Both counts are final once Send has returned: Send waits for the
	// ACK, which the receiver sends after counting the segment, and the
	// sender counts a segment before writing it.
	for i, r := range b.Stats().Rails {
		n := 0
		for _, c := range st.Scheduler.Recent {
			if c == i {
				n++
			}
		}
		if uint64(n) != r.SegmentsReceived {
			t.Fatalf("rail %d: chosen %d times, carried %d segments", i, n, r.SegmentsReceived)
		}
	}
	alternates(st)

	sendOne(t, a, b, 100*seg) // the ring wraps
	st = a.Stats()
	if len(st.Scheduler.Recent) != RecentChoices || st.Scheduler.Decisions != 140 {
		t.Fatalf("after 140 segments: %d recent choices, %d decisions", len(st.Scheduler.Recent), st.Scheduler.Decisions)
	}
	if sb := b.Stats(); sb.Rails[0].SegmentsReceived != 70 || sb.Rails[1].SegmentsReceived != 70 {
		t.Fatalf("segments per rail: %d, %d; want 70 each", sb.Rails[0].SegmentsReceived, sb.Rails[1].SegmentsReceived)
	}
	alternates(st)

	// The receiving side sent no data: no choices.
	if sb := b.Stats(); len(sb.Scheduler.Recent) != 0 || sb.Scheduler.Decisions != 0 || sb.Rails[0].RecentShare != 0 {
		t.Fatalf("receiver's scheduler stats: %+v", sb.Scheduler)
	}
}

// TestStatsExplainer: a scheduler implementing sched.Explainer has its
// levels, values and counters in Stats; Stats may run concurrently with
// Sends (Explain runs under the scheduler's lock, which -race checks).
func TestStatsExplainer(t *testing.T) {
	const seg = 4096
	a, b := pair(t, 3, Config{Scheduler: testExplainer, SegmentSize: seg})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				_ = a.Stats()
			}
		}
	}()
	sendOne(t, a, b, 30*seg)
	close(stop)
	wg.Wait()
	st := a.Stats()
	if !st.Scheduler.Explains || st.Scheduler.Name != testExplainer {
		t.Fatalf("scheduler stats %+v", st.Scheduler)
	}
	if st.Scheduler.Decisions != 30 || st.Scheduler.Explorations != 7 {
		t.Fatalf("decisions %d, explorations %d; want 30, 7", st.Scheduler.Decisions, st.Scheduler.Explorations)
	}
	for i, r := range st.Rails {
		if r.Level != i+3 || r.Value != float64(r.SegmentsSent)/2 || r.SegmentsSent != 10 {
			t.Errorf("rail %d: level %d value %v segments %d; want %d, %v, 10", i, r.Level, r.Value, r.SegmentsSent, i+3, float64(r.SegmentsSent)/2)
		}
	}
	if len(st.Scheduler.Recent) != 30 {
		t.Fatalf("%d recent choices, want 30", len(st.Scheduler.Recent))
	}
}

// TestPickRecordsWithoutAllocating: recording a choice in the ring costs
// no allocation on the hot path.
func TestPickRecordsWithoutAllocating(t *testing.T) {
	a, _ := pair(t, 2, Config{Scheduler: "roundrobin"})
	a.mu.Lock()
	defer a.mu.Unlock()
	before := a.picks
	if n := testing.AllocsPerRun(1000, func() { a.pickLocked(a.now(), 1000) }); n != 0 {
		t.Fatalf("pickLocked allocates %v times per call", n)
	}
	if a.picks == before {
		t.Fatal("no choice recorded")
	}
}

// TestStatsAckDelay: once a rail's segments were acknowledged its
// AckDelay is measured (positive, and no longer than the test took), and
// a rail that carried nothing has none.
func TestStatsAckDelay(t *testing.T) {
	const seg = 4096
	a, b := pair(t, 2, Config{Scheduler: "roundrobin", SegmentSize: seg})
	start := time.Now()
	for range 20 {
		sendOne(t, a, b, 8*seg) // large: Send returns once every segment is acknowledged
	}
	took := time.Since(start)
	for _, r := range a.Stats().Rails {
		if r.AckDelay <= 0 || r.AckDelay > took {
			t.Errorf("rail %s: AckDelay %v after 20 acknowledged messages in %v", r.Name, r.AckDelay, took)
		}
	}
	for _, r := range b.Stats().Rails {
		if r.AckDelay != 0 {
			t.Errorf("rail %s of the receiving side sent nothing, yet AckDelay is %v", r.Name, r.AckDelay)
		}
	}
}
