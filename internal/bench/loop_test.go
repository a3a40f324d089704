package bench

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/emu"
	"github.com/multirail/multirail/internal/topo"
	"github.com/multirail/multirail/sched"
)

func emuPair(t *testing.T, cfg topo.PairConfig) *topo.Pair {
	t.Helper()
	p, err := topo.NewPair(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestSendWindow(t *testing.T) {
	p := emuPair(t, topo.PairConfig{Rails: []emu.Spec{{Kind: emu.KindLoop}, {Kind: emu.KindLoop}}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var (
		mu      sync.Mutex
		started = map[int]int{}
		done    atomic.Int64
	)
	recv := make(chan error, 1)
	var tags sync.Map
	go func() {
		recv <- Receive(ctx, p.Acceptor, func(m multirail.Message, _ time.Time) error {
			tags.Store(m.Tag, true)
			if len(m.Data) != 1000 || m.Data[3] != 21 {
				return errors.New("wrong payload")
			}
			return nil
		})
	}()
	n, err := SendWindow(ctx, p.Dialer, Payload(1000), SendOptions{
		Window: 3, Until: time.Now().Add(200 * time.Millisecond),
		OnStart: func(tag int, _ time.Time) { mu.Lock(); started[tag]++; mu.Unlock() },
		OnDone:  func(int, time.Time, time.Duration) { done.Add(1) },
	})
	if err != nil || n == 0 || int64(n) != done.Load() {
		t.Fatalf("%d sends, %d done, %v", n, done.Load(), err)
	}
	if len(started) != 3 || started[0]+started[1]+started[2] != n {
		t.Errorf("started per tag %v, %d sends", started, n)
	}
	p.Dialer.Close()
	if err := <-recv; err != nil {
		t.Fatalf("Receive: %v", err)
	}
	for tag := range uint32(3) {
		if _, ok := tags.Load(tag); !ok {
			t.Errorf("nothing on tag %d", tag)
		}
	}
	// A Send on a closed connection ends the loop with its error.
	if _, err := SendWindow(ctx, p.Dialer, Payload(10), SendOptions{Window: 2, Until: time.Now().Add(time.Second)}); err == nil {
		t.Error("SendWindow on a closed connection: no error")
	}
}

// TestRunNominalRatesOnlyForWeighted: bench gives the rails' configured
// rates to the weighted scheduler, which needs them, and to no other.
func TestRunNominalRatesOnlyForWeighted(t *testing.T) {
	specs := []emu.Spec{{Kind: emu.KindEmu, RateBps: 200e6}, {Kind: emu.KindEmu, RateBps: 100e6}}
	for _, name := range sched.Names() {
		pc := pairConfig(Options{Rails: specs, Sched: name}, multirail.Config{Scheduler: name})
		if pc.Nominal != (name == "weighted") {
			t.Errorf("%s: nominal rates given: %v", name, pc.Nominal)
		}
	}
	if testing.Short() {
		return
	}
	for _, name := range []string{"weighted", "shortestqueue"} {
		r, err := Run(context.Background(), Options{Rails: specs, Sched: name, Size: 256 << 10, Duration: 300 * time.Millisecond})
		if err != nil || r.Messages == 0 || r.Sched != name {
			t.Errorf("%s: %+v, %v", name, r, err)
		}
	}
}
