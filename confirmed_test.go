package multirail

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// TestDeliveryExcludesTurnaround: the scheduler learns a rail's delay
// from when its segments arrived at the peer (the ACK's arrival time),
// not from when the ACK came back. After prompt exchanges, the peer holds
// each reply (and so its lazy ACK, which would ride the reply) for 3 ms:
// learning from the ACKs' own times, the rail's value climbs to the
// milliseconds the ACKs waited; timed by their arrival times it stays at
// the loopback's delay.
func TestDeliveryExcludesTurnaround(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("lazy ACKs need busy polling, which needs Linux")
	}
	a, b := pair(t, 1, Config{Token: NewToken(), BusyPoll: MaxBusyPoll})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	exchange := func(hold time.Duration) {
		t.Helper()
		if err := a.Send(ctx, 1, []byte("ping")); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Recv(ctx); err != nil {
			t.Fatal(err)
		}
		if hold > 0 {
			time.Sleep(hold) // the peer's turnaround: not the rail's delay
		}
		if err := b.Send(ctx, 1, []byte("pong")); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Recv(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 50 {
		exchange(0)
	}
	for range 60 {
		exchange(3 * time.Millisecond)
	}
	st := a.Stats()
	if !st.Scheduler.Explains {
		t.Fatalf("scheduler %s does not explain its values", st.Scheduler.Name)
	}
	d := time.Duration(-st.Rails[0].Value * 1e9)
	t.Logf("the rail's learned delay: %v", d)
	if d > 800*time.Microsecond {
		t.Errorf("the rail's learned delay is %v after replies held 3 ms, want the loopback's (under 0.8 ms): the peer's turnaround was learned", d)
	}
}
