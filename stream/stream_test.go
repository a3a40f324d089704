package stream

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/multirail/multirail/emu"
	"github.com/multirail/multirail/internal/topo"
	"github.com/multirail/multirail/lossy"
	"github.com/multirail/multirail/lossy/discard"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pair returns two StageConns joined by a multirail connection of two
// loopback rails.
func pair(t *testing.T, cfg lossy.StageConfig) (*lossy.StageConn, *lossy.StageConn) {
	t.Helper()
	p, err := topo.NewPair(context.Background(), topo.PairConfig{Rails: []emu.Spec{{Kind: emu.KindLoop}, {Kind: emu.KindLoop}}, CloseListener: true})
	if err != nil {
		t.Fatal(err)
	}
	a, b := p.Dialer, p.Acceptor
	sa, err := lossy.NewStageConn(a, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := lossy.NewStageConn(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sa.Close(); sb.Close() })
	return sa, sb
}

func transfer(t *testing.T, scfg lossy.StageConfig, cfg Config, data []byte) ([]byte, SendStats, ReceiveStats, *lossy.StageConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sa, sb := pair(t, scfg)
	type res struct {
		st  SendStats
		err error
	}
	done := make(chan res, 1)
	go func() { st, err := Send(ctx, sa, bytes.NewReader(data), cfg); done <- res{st, err} }()
	var out bytes.Buffer
	rst, err := Receive(ctx, sb, &out, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := <-done
	if s.err != nil {
		t.Fatal(s.err)
	}
	return out.Bytes(), s.st, rst, sa
}

func randomData(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestReliable: with nothing discarded the stream arrives byte for byte,
// whatever its length against the block and packet sizes.
func TestReliable(t *testing.T) {
	for _, n := range []int{0, 1, 4095, 4096, 65536, 300_001} {
		data := randomData(n)
		out, st, rst, _ := transfer(t, lossy.StageConfig{Reliable: true}, Config{BlockSize: 64 << 10, PacketSize: 4096}, data)
		if !bytes.Equal(out, data) {
			t.Fatalf("%d bytes: output differs (%d bytes)", n, len(out))
		}
		if st.PacketsDropped != 0 || rst.PacketsMissing != 0 || rst.Bytes != int64(n) {
			t.Fatalf("%d bytes: %+v %+v", n, st, rst)
		}
	}
}

// TestBoundedLoss: with a discard rate the stream keeps its length, every
// packet that arrived is in place, no block loses more than the bound,
// and the receiver's quality reports reach the sender's controller.
func TestBoundedLoss(t *testing.T) {
	data := randomData(2 << 20)
	const bound = 0.2
	cfg := Config{BlockSize: 128 << 10, PacketSize: 2048}
	out, st, rst, sa := transfer(t, lossy.StageConfig{Seed: 3, Discard: discard.Config{Initial: bound, Max: bound, DelayThreshold: 1e9}}, cfg, data)
	if len(out) != len(data) {
		t.Fatalf("%d bytes out of %d", len(out), len(data))
	}
	if st.PacketsDropped == 0 || rst.PacketsMissing != st.PacketsDropped {
		t.Fatalf("dropped %d, receiver concealed %d", st.PacketsDropped, rst.PacketsMissing)
	}
	// At most ceil(bound*n) of a block's n packets are dropped.
	per := cfg.BlockSize / cfg.PacketSize
	if worst := 1 - rst.WorstBlockShare; worst > (bound*float64(per)+1)/float64(per) {
		t.Fatalf("a block lost %.2f of its packets, bound %.2f", worst, bound)
	}
	same := 0
	for i := 0; i < len(data); i += cfg.PacketSize {
		j := min(len(data), i+cfg.PacketSize)
		if bytes.Equal(out[i:j], data[i:j]) {
			same++
		}
	}
	if total := (len(data) + cfg.PacketSize - 1) / cfg.PacketSize; int64(total-same) != rst.PacketsMissing {
		t.Fatalf("%d of %d packets differ from the input, %d were concealed", total-same, total, rst.PacketsMissing)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for sa.Stats().Controller.Applied < uint64(rst.Blocks) {
		select {
		case <-ctx.Done():
			t.Fatalf("controller applied %d of %d blocks' feedback", sa.Stats().Controller.Applied, rst.Blocks)
		case <-time.After(time.Millisecond):
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []Config{{BlockSize: 10}, {PacketSize: 1}, {BlockSize: 2048, PacketSize: 4096}, {BlockSize: 1 << 30}} {
		if _, err := Send(context.Background(), nil, bytes.NewReader(nil), c); !errors.Is(err, ErrConfig) {
			t.Errorf("Send with %+v: %v, want ErrConfig", c, err)
		}
	}
}
