package multirail

import (
	"bytes"
	"testing"
	"time"

	"github.com/multirail/multirail/internal/wire"
)

// TestAckAfterControlFrame: a DATA frame followed in the same read by a
// control frame of the peer's (a PING here, an ACK in a two-way exchange)
// and then nothing is still acknowledged. The reader used to leave the
// DATA frame's ACK to the next DATA frame whenever more bytes were
// buffered behind it; with a control frame there and the rail quiet after
// it, no ACK went out, and on connections of several rails the sender took
// the rail down as stalled after Config.RailTimeout (seen in the lab as
// "no acknowledgement for 2.2s with 1 segments in flight").
func TestAckAfterControlFrame(t *testing.T) {
	for _, poll := range []time.Duration{0, time.Millisecond} {
		ln, sink := hostileListener(t, Config{Token: "tok", BusyPoll: poll})
		defer func() {
			if t.Failed() {
				t.Log(sink.String())
			}
		}()
		h := hostileHello(0x31)
		raw, _ := rawSessionOn(t, ln, "tok", h)
		const n = 64 << 10 // the HELLO's segment size
		var w bytes.Buffer
		w.Write(dataHeader(h, 1, 2*n, 0, n)) // the first half of a message: no completion to acknowledge
		w.Write(bytes.Repeat([]byte{1}, n))
		w.Write(wire.AppendPing(nil))
		if _, err := raw.Write(w.Bytes()); err != nil {
			t.Fatal(err)
		}
		// AckDelay is 1 ms (4 on a polling connection); a second is
		// generous, and less than RailTimeout.
		if err := raw.SetReadDeadline(time.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		for {
			hd, body, err := readHsFrame(raw)
			if err != nil {
				t.Fatalf("BusyPoll %v: no ACK of the DATA frame within a second: %v", poll, err)
			}
			if hd.Type != wire.TypeAck {
				continue
			}
			a, err := wire.ParseAck(body)
			if err != nil {
				t.Fatal(err)
			}
			if a.Received >= 1 {
				break
			}
		}
	}
}
