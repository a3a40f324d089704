package lossy

import (
	"context"
	"testing"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/emu"
	"github.com/multirail/multirail/internal/topo"
)

// emuPair returns two connected Conns (dialer, acceptor) over one emulated
// rail per rate (bit/s, also the rails' nominal rates), closed when the
// test ends.
func emuPair(t *testing.T, rates ...float64) (*multirail.Conn, *multirail.Conn) {
	t.Helper()
	var rails []emu.Spec
	for _, r := range rates {
		rails = append(rails, emu.Spec{Kind: emu.KindEmu, RateBps: r})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := topo.NewPair(ctx, topo.PairConfig{Rails: rails, Nominal: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p.Dialer, p.Acceptor
}

// waitFor polls cond every millisecond until it holds or ctx ends.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}
