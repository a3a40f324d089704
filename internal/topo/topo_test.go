package topo

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/emu"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestLinks(t *testing.T) {
	specs := []emu.Spec{{Kind: emu.KindEmu, RateBps: 10e6}, {Kind: emu.KindLoop}}
	var asked []int
	addrs, links, err := Links("127.0.0.1:9", specs, func(i int) []emu.Load { asked = append(asked, i); return nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeLinks(links)
	if len(addrs) != 2 || addrs[1] != "127.0.0.1:9" || links[1] != nil || links[0] == nil || addrs[0] != links[0].Addr() {
		t.Errorf("addrs %v, links %v", addrs, links)
	}
	if len(asked) != 1 || asked[0] != 0 {
		t.Errorf("loads asked for rails %v, want [0] (loop rails take none)", asked)
	}
	_, _, err = Links("127.0.0.1:9", []emu.Spec{specs[0], {Kind: emu.KindTCP, Local: "10.0.0.1", Remote: "10.0.0.2"}}, nil, nil)
	if !errors.Is(err, ErrSpec) {
		t.Errorf("a tcp rail: %v, want ErrSpec", err)
	}
}

func TestPair(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	specs := []emu.Spec{{Kind: emu.KindEmu, RateBps: 200e6}, {Kind: emu.KindLoop}}
	for _, nominal := range []bool{false, true} {
		p, err := NewPair(ctx, PairConfig{Rails: specs, Nominal: nominal, Name: func(i int) string { return []string{"a", "b"}[i] }})
		if err != nil {
			t.Fatal(err)
		}
		if p.Rails[0].Name != "a" || p.Rails[1].Name != "b" || p.Links[0] == nil || p.Links[1] != nil {
			t.Errorf("rails %+v, links %v", p.Rails, p.Links)
		}
		if want := map[bool]float64{false: 0, true: 200e6}[nominal]; p.Rails[0].Bandwidth != want || p.Rails[1].Bandwidth != 0 {
			t.Errorf("nominal %v: bandwidths %v, %v", nominal, p.Rails[0].Bandwidth, p.Rails[1].Bandwidth)
		}
		if err := p.Dialer.Send(ctx, 7, []byte("hello")); err != nil {
			t.Fatal(err)
		}
		m, err := p.Acceptor.Recv(ctx)
		if err != nil || string(m.Data) != "hello" || m.Tag != 7 {
			t.Fatalf("%q %d %v", m.Data, m.Tag, err)
		}
		if names := p.Acceptor.Stats().Rails; names[0].Name != "a" || names[1].Name != "b" {
			t.Errorf("the acceptor's rails are %q, %q", names[0].Name, names[1].Name)
		}
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	}
	// weighted cannot run without the rates.
	if _, err := NewPair(ctx, PairConfig{Rails: specs[:1], Config: multirail.Config{Scheduler: "weighted"}}); err == nil {
		t.Error("weighted without nominal rates: no error")
	}
	if _, err := NewPair(ctx, PairConfig{}); !errors.Is(err, ErrSpec) {
		t.Errorf("no rails: %v", err)
	}
}

func TestRing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n = 3
	r, err := NewRing(ctx, n, func(int) PairConfig {
		return PairConfig{Rails: []emu.Spec{{Kind: emu.KindLoop}, {Kind: emu.KindLoop}}, CloseListener: true}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := range n {
		if err := r.Out[i].Send(ctx, uint32(i), []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		m, err := r.In[(i+1)%n].Recv(ctx)
		if err != nil || m.Tag != uint32(i) || m.Data[0] != byte(i) {
			t.Errorf("rank %d got %v %v from rank %d", (i+1)%n, m, err, i)
		}
	}
}
