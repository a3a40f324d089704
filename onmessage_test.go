package multirail

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestOnMessageOrder: messages reach the OnMessage handler and Recv
// together in the order they were sent on each tag, none lost and none
// twice, while the handler declines some (which sends it and the ones
// after it to Recv) and the handler is removed and set again mid-stream;
// over one rail (where Recv reads the rail itself) and three, with and
// without busy polling, small messages and ones of several segments.
func TestOnMessageOrder(t *testing.T) {
	for _, rails := range []int{1, 3} {
		for _, poll := range []time.Duration{0, 200 * time.Microsecond} {
			t.Run(fmt.Sprintf("rails=%d/poll=%v", rails, poll), func(t *testing.T) {
				testOnMessageOrder(t, rails, poll)
			})
		}
	}
}

func testOnMessageOrder(t *testing.T, rails int, poll time.Duration) {
	const n, tags, burst = 1500, 3, 25
	a, b := pair(t, rails, Config{SegmentSize: 4096, BusyPoll: poll})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var (
		mu     sync.Mutex
		next   [tags]uint32 // the sequence number each tag expects next
		got    int
		target int // got that the sender waits for (a burst's end)
		caught = make(chan struct{}, 1)
		failed error
		all    = make(chan struct{})
	)
	take := func(m Message, by string) {
		mu.Lock()
		defer mu.Unlock()
		if len(m.Data) < 4 || m.Tag >= tags {
			failed = fmt.Errorf("%s: message of %d bytes on tag %d", by, len(m.Data), m.Tag)
		} else if seq := binary.BigEndian.Uint32(m.Data); seq != next[m.Tag] && failed == nil {
			failed = fmt.Errorf("%s: tag %d: message %d where %d was next", by, m.Tag, seq, next[m.Tag])
		} else {
			next[m.Tag]++
		}
		if got++; got == n {
			close(all)
		}
		if got == target {
			caught <- struct{}{}
		}
	}
	rng := rand.New(rand.NewPCG(uint64(rails), uint64(poll)))
	handler := func(m Message) bool {
		if rng.IntN(4) == 0 { // only the handler's goroutine draws (offers are serialised)
			return false
		}
		take(m, "handler")
		return true
	}
	b.OnMessage(handler)

	recvDone := make(chan error, 1)
	go func() {
		for {
			m, err := b.Recv(ctx)
			if err != nil {
				recvDone <- err
				return
			}
			// A consumer that takes its time with what Recv returns: the
			// rails complete later messages meanwhile, and none of them may
			// reach the handler before this one is handled.
			// (A spin: a sleep this short lasts a millisecond when the
			// process is otherwise idle.)
			for t0 := time.Now(); time.Since(t0) < 100*time.Microsecond; {
				runtime.Gosched()
			}
			take(m, "Recv")
			b.Release(m.Data)
		}
	}()

	sendDone := make(chan error, 1)
	go func() {
		var seq [tags]uint32
		srng := rand.New(rand.NewPCG(7, uint64(rails)))
		for i := range n {
			tag := uint32(srng.IntN(tags))
			size := []int{8, 100, 3000, 20000}[srng.IntN(4)]
			p := make([]byte, size)
			binary.BigEndian.PutUint32(p, seq[tag])
			seq[tag]++
			if err := a.Send(ctx, tag, p); err != nil {
				sendDone <- fmt.Errorf("send %d: %w", i, err)
				return
			}
			// Bursts: between them Recv finds nothing waiting and the
			// handler is offered messages again.
			if i%burst == burst-1 {
				mu.Lock()
				target = i + 1
				wait := got < target
				mu.Unlock()
				if wait {
					select {
					case <-caught:
					case <-ctx.Done():
						sendDone <- ctx.Err()
						return
					}
				}
			}
			switch i {
			case n / 2:
				b.OnMessage(nil)
			case 3 * n / 4:
				b.OnMessage(handler)
			}
		}
		sendDone <- nil
	}()

	select {
	case <-all:
	case err := <-recvDone:
		t.Fatalf("Recv: %v", err)
	case <-ctx.Done():
		mu.Lock()
		t.Fatalf("%d of %d messages arrived (%v)", got, n, failed)
	}
	if err := <-sendDone; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if failed != nil {
		t.Fatal(failed)
	}
	st := b.Stats()
	t.Logf("handed %d, declined %d, Recv waits %d", st.Path.Handed, st.Path.Declined, st.Path.RecvWaits)
	if st.MessagesReceived != n || st.Path.Handed == 0 || st.Path.Declined == 0 || st.Path.Handed >= n {
		t.Errorf("received %d (want %d), handed %d, declined %d: want some of each", st.MessagesReceived, n, st.Path.Handed, st.Path.Declined)
	}
}
