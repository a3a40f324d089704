package tunnel

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/multirail/multirail"
)

// rawPair is a session (accepting streams when accepting is set) whose peer
// is a bare multirail.Conn the test writes frames on, as a broken or
// hostile peer would.
func rawPair(t *testing.T, accepting bool, dial func(ctx context.Context) (net.Conn, error)) (*Session, *multirail.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	base := ConnConfig(multirail.Config{Token: multirail.NewToken()}, 0)
	ln, err := multirail.Listen("127.0.0.1:0", base)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan *multirail.Conn, 1)
	go func() { c, _ := ln.Accept(ctx); acc <- c }()
	dcfg := base
	dcfg.Rails = []multirail.Rail{{Addr: ln.Addr().String()}}
	raw, err := multirail.Dial(ctx, dcfg)
	if err != nil {
		t.Fatal(err)
	}
	c := <-acc
	if c == nil {
		t.Fatal("accept failed")
	}
	cfg := Config{Window: MinWindow}
	if accepting {
		cfg.Dial = dial
	}
	s, err := NewSession(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(); _ = c.Close(); _ = raw.Close() })
	return s, raw
}

// TestHostilePeer: every violation ends the session with ErrProtocol
// (the caller then drops the connection); nothing panics, and the
// session's goroutines end (goleak).
func TestHostilePeer(t *testing.T) {
	type msg struct {
		tag uint32
		m   []byte
	}
	big := make([]byte, 1+MinWindow/2)
	big[0] = KindData
	open := appendOpen(nil, MinWindow)
	for _, tc := range []struct {
		name      string
		accepting bool
		msgs      []msg
		want      string
	}{
		{"data for a stream never opened", true, []msg{{5, []byte{KindData, 1}}}, "never opened"},
		{"open sent to the opening end", false, []msg{{1, open}}, "sent to the opening end"},
		{"open of an open stream", true, []msg{{2, open}, {2, open}}, "which is open"},
		{"data beyond the window", true, []msg{{1, open}, {1, big}, {1, big}, {1, big}}, "beyond its credit"},
		{"data after fin", true, []msg{{1, open}, {1, []byte{KindFin}}, {1, []byte{KindData, 1}}}, "after its FIN"},
		{"second fin", true, []msg{{1, open}, {1, []byte{KindFin}}, {1, []byte{KindFin}}}, "second FIN"},
		{"garbage on tag 0", true, []msg{{0, []byte{KindData, 1}}}, "only WINDOW"},
		{"credit overflow", true, []msg{{1, open}, {0, appendWindow(nil, 1, MaxWindow)}, {0, appendWindow(nil, 1, MaxWindow)}, {0, appendWindow(nil, 1, MaxWindow)}}, "credit beyond"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The target never reads: a synchronous pipe nobody drains.
			ends := make(chan net.Conn, 4)
			dial := func(context.Context) (net.Conn, error) {
				a, b := net.Pipe()
				ends <- b
				return a, nil
			}
			s, raw := rawPair(t, tc.accepting, dial)
			t.Cleanup(func() {
				for len(ends) > 0 {
					(<-ends).Close()
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, m := range tc.msgs {
				if err := raw.Send(ctx, m.tag, m.m); err != nil {
					break // the session may drop us before the last one
				}
			}
			select {
			case <-s.Done():
			case <-ctx.Done():
				t.Fatal("the session did not end on the violation")
			}
			if err := s.Err(); !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("session ended with %v; want ErrProtocol containing %q", err, tc.want)
			}
			// The session closed the connection: the peer learns it.
			for {
				m, err := raw.Recv(ctx)
				if err != nil {
					if ctx.Err() != nil {
						t.Fatal("the hostile peer's connection stayed open")
					}
					break
				}
				raw.Release(m.Data) // frames sent before the violation
			}
		})
	}
}
