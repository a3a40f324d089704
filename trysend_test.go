package multirail

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"
)

// TestTrySend: TrySend sends eager messages while the peer's credit
// covers them, declines (sending nothing) once it does not and for
// messages above EagerLimit, and sends again once the peer has received;
// exactly what it reported sent arrives, in order.
func TestTrySend(t *testing.T) {
	cfg := Config{MaxMessageSize: 64 << 10, MaxReceiveBuffer: 256 << 10}
	a, b, _ := emuPair(t, cfg, 1e9, 1e9)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	if sent, err := a.TrySend(1, make([]byte, a.cfg.EagerLimit+1)); sent || err != nil {
		t.Fatalf("TrySend above EagerLimit = %v, %v; want false, nil", sent, err)
	}
	msg := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 8<<10) }
	n := 0
	for ; n < 1000; n++ {
		sent, err := a.TrySend(7, msg(n))
		if err != nil {
			t.Fatal(err)
		}
		if !sent {
			break
		}
	}
	if n == 0 || n == 1000 {
		t.Fatalf("TrySend sent %d of 1000 8 KiB messages into a 256 KiB window", n)
	}
	recvAll := func(from, to int) {
		for i := from; i < to; i++ {
			m, err := b.Recv(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if m.Tag != 7 || !bytes.Equal(m.Data, msg(i)) {
				t.Fatalf("message %d: tag %d, %d bytes of %d; want tag 7, 8192 bytes of %d", i, m.Tag, len(m.Data), m.Data[0], byte(i))
			}
		}
	}
	recvAll(0, n)
	waitFor(ctx, t, "TrySend to send again once the peer received", func() bool {
		sent, err := a.TrySend(7, msg(n))
		if err != nil {
			t.Fatal(err)
		}
		return sent
	})
	recvAll(n, n+1)
	if err := a.Send(ctx, 9, []byte("end")); err != nil {
		t.Fatal(err)
	}
	if m, err := b.Recv(ctx); err != nil || m.Tag != 9 {
		t.Fatalf("after the tries: %v, %v; want the tag 9 message (nothing else was sent)", fmt.Sprint(m.Tag), err)
	}
}
