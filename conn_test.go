package multirail

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// pair returns a connected dialer/acceptor pair over n loopback rails.
func pair(t testing.TB, n int, cfg Config) (*Conn, *Conn) {
	t.Helper()
	ln, err := Listen("127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	dcfg := cfg
	dcfg.Rails = nil
	for i := 0; i < n; i++ {
		dcfg.Rails = append(dcfg.Rails, Rail{Name: fmt.Sprintf("r%d", i), Addr: ln.Addr().String()})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var srv *Conn
	var aerr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); srv, aerr = ln.Accept(ctx) }()
	cli, err := Dial(ctx, dcfg)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if aerr != nil {
		t.Fatal(aerr)
	}
	t.Cleanup(func() { cli.Close(); srv.Close() })
	return cli, srv
}

func TestSendRecvSizes(t *testing.T) {
	cfg := Config{SegmentSize: 4096, QueueDepth: 4}
	a, b := pair(t, 3, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sizes := []int{0, 1, 4095, 4096, 4097, 100000, 1 << 20}
	rng := rand.New(rand.NewPCG(1, 2))
	var want [][]byte
	for _, n := range sizes {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		want = append(want, p)
	}
	errc := make(chan error, 1)
	go func() {
		for i, p := range want {
			if err := a.Send(ctx, uint32(i%2), p); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	got := map[uint32][][]byte{}
	for range want {
		m, err := b.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got[m.Tag] = append(got[m.Tag], m.Data)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	for i, p := range want {
		tag := uint32(i % 2)
		q := got[tag][0]
		got[tag] = got[tag][1:]
		if !bytes.Equal(p, q) {
			t.Fatalf("message %d (%d bytes): got %d bytes, sha %x want %x", i, len(p), len(q), sha256.Sum256(q), sha256.Sum256(p))
		}
	}
}

// TestCloseBothAtOnce: both ends closing at the same moment (every rank
// at the end of a job) do not wait for each other until closeLinger runs
// out: the reader that sees the peer's GOAWAY while its own side is
// shutting down must not start a second shutdown that waits for the first.
func TestCloseBothAtOnce(t *testing.T) {
	for range 5 {
		a, b := pair(t, 2, Config{})
		start := time.Now()
		var wg sync.WaitGroup
		wg.Go(func() { a.Close() })
		wg.Go(func() { b.Close() })
		wg.Wait()
		if d := time.Since(start); d >= closeLinger {
			t.Fatalf("closing both ends at once took %v, as long as the linger (%v): they waited for each other", d, closeLinger)
		}
	}
}
