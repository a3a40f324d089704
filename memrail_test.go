package multirail

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// memListener is a net.Listener of in-memory connections (net.Pipe): rails
// without sockets, through NewListener and Config.DialRail.
type memListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newMemListener() *memListener {
	return &memListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *memListener) Addr() net.Addr { return memAddr{} }

// dial connects a new in-memory rail.
func (l *memListener) dial(ctx context.Context, _ Rail) (net.Conn, error) {
	a, b := net.Pipe()
	select {
	case l.conns <- b:
		return a, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type memAddr struct{}

func (memAddr) Network() string { return "mem" }
func (memAddr) String() string  { return "mem" }

// TestInMemoryRails runs connections of one rail (the direct-Recv path)
// and of three rails over in-memory pipes: messages of every size class
// both ways, intact and in order per tag, then an orderly close on which
// Recv sees io.EOF. No socket is involved.
func TestInMemoryRails(t *testing.T) {
	for _, rails := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d rails", rails), func(t *testing.T) {
			ml := newMemListener()
			cfg := Config{SegmentSize: 4096, EagerLimit: 1024}
			ln, err := NewListener(ml, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			cfg.DialRail = ml.dial
			for i := range rails {
				cfg.Rails = append(cfg.Rails, Rail{Name: fmt.Sprintf("mem%d", i), Addr: "mem"})
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var a, b *Conn
			var aerr error
			dialed := make(chan struct{})
			go func() {
				defer close(dialed)
				a, aerr = Dial(ctx, cfg)
			}()
			b, err = ln.Accept(ctx)
			<-dialed
			if err != nil || aerr != nil {
				t.Fatalf("accept: %v, dial: %v", err, aerr)
			}
			sizes := []int{0, 1, 1000, 4096, 4097, 100_000, 1 << 20}
			msg := func(n, seed int) []byte {
				p := make([]byte, n)
				for i := range p {
					p[i] = byte(i*7 + seed)
				}
				return p
			}
			// Both directions at once: a sender per side, a receiver per side.
			errs := make(chan error, 4)
			for dir, pair := range [][2]*Conn{{a, b}, {b, a}} {
				from, to := pair[0], pair[1]
				go func() {
					for i, n := range sizes {
						if err := from.Send(ctx, uint32(dir), msg(n, i+dir)); err != nil {
							errs <- fmt.Errorf("send %d bytes: %w", n, err)
							return
						}
					}
					errs <- nil
				}()
				go func() {
					for i, n := range sizes {
						m, err := to.Recv(ctx)
						if err != nil {
							errs <- fmt.Errorf("recv message %d: %w", i, err)
							return
						}
						if m.Tag != uint32(dir) || !bytes.Equal(m.Data, msg(n, i+dir)) {
							errs <- fmt.Errorf("message %d: tag %d, %d bytes; want tag %d, %d bytes as sent", i, m.Tag, len(m.Data), dir, n)
							return
						}
					}
					errs <- nil
				}()
			}
			for range 4 {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			st := a.Stats()
			var sent uint64
			for _, r := range st.Rails {
				if !r.Up {
					t.Errorf("rail %s down", r.Name)
				}
				sent += r.SegmentsSent
			}
			if sent < uint64(len(sizes)) {
				t.Errorf("%d segments sent for %d messages", sent, len(sizes))
			}
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Recv(ctx); !errors.Is(err, io.EOF) {
				t.Fatalf("Recv after the peer's Close: %v, want io.EOF", err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
