package multirail

import (
	"testing"
	"time"

	"github.com/multirail/multirail/internal/sender"
)

// TestWriterTakesStolenTail: a rail's writer woken with nothing queued of
// its own, while another rail holds the tail of a planned message that it
// would finish sooner, leaves with that tail as its batch. flush stops at
// the first empty batch, and the writer used to steal the tail after
// finding its batch empty: the frames then waited on the idle rail for its
// next wake-up, the ping tick (IdleTimeout/3, 10 s). In the 4-host lab
// that made 1 alltoall run in 3 take 0.5-1 s an iteration instead of 0.1
// (a planned share ending 8.5-10 s after it began, every socket idle).
func TestWriterTakesStolenTail(t *testing.T) {
	c := &Conn{planning: true, start: time.Now()}
	c.cfg.QueueDepth = 16
	for i, rate := range []float64{10e6, 1e9} { // rail 0 slow, rail 1 fast and idle
		core, err := sender.New[*segment](sender.Config{QueueDepth: 16, SegmentSize: 64 << 10, Nominal: rate})
		if err != nil {
			t.Fatal(err)
		}
		c.rails = append(c.rails, &rail{idx: i, core: core, life: lifecycle{phase: phaseUp}})
	}
	msg := &outMsg{plan: &planRecord{bytes: make([]int64, 2), end: make([]int64, 2)}}
	now := c.now()
	for range 4 {
		s := &segment{payload: make([]byte, 16<<10), msg: msg}
		msg.remaining++
		msg.plan.bytes[0] += int64(len(s.payload))
		c.push(now, c.rails[0], s)
	}
	fast := c.rails[1]
	c.mu.Lock()
	n := c.takeBatchLocked(fast, now, 1<<20)
	c.mu.Unlock()
	if n == 0 || len(fast.w.batch) == 0 {
		t.Fatalf("the idle fast rail's batch is empty (rail 0 still queues %d segments, rail 1 %d): the stolen tail waits for its next wake-up",
			c.rails[0].core.Len(), fast.core.Len())
	}
	if int(fast.stolen) != len(fast.w.batch) || msg.plan.bytes[1] == 0 || msg.plan.bytes[0]+msg.plan.bytes[1] != 4*16<<10 {
		t.Errorf("stolen %d for a batch of %d; the plan's bytes per rail %v (want the moved ones counted on rail 1, 64 KiB in all)",
			fast.stolen, len(fast.w.batch), msg.plan.bytes)
	}
	t.Logf("batch of %d segments (%d B); rail 0 keeps %d; plan bytes %v", len(fast.w.batch), n, c.rails[0].core.Len(), msg.plan.bytes)
}
