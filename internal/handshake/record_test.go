package handshake

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/flynn/noise"

	"github.com/multirail/multirail/internal/wire"
)

// cipherPair returns a sealing and an opening Cipher of one direction.
func cipherPair() (*Cipher, *Cipher) {
	k := [32]byte{1, 2, 3}
	return NewCipher(noise.UnsafeNewCipherState(Suite, k, 0)), NewCipher(noise.UnsafeNewCipherState(Suite, k, 0))
}

func dataFrame(n int) []byte {
	b := make([]byte, wire.DataHeaderSize+n)
	wire.PutData(b, wire.Data{Session: 1, Message: 2, Total: uint64(n), Len: uint32(n)})
	for i := range n {
		b[wire.DataHeaderSize+i] = byte(i * 7)
	}
	return b
}

// TestSealFrames: a stream of frames sealed takes SealedSize bytes per
// frame, and opening its records in the documented order (header; for
// DATA the fixed part, then payload records of at most MaxRecord; else the
// body if any) gives the frames back. A record opened out of turn fails.
func TestSealFrames(t *testing.T) {
	var frames [][]byte
	for _, n := range []int{0, 1, MaxRecord - 1, MaxRecord, MaxRecord + 1, 3*MaxRecord + 5} {
		frames = append(frames, dataFrame(n))
	}
	frames = append(frames, wire.AppendAck(nil, wire.Ack{Received: 9, Credit: 1 << 20}), wire.AppendPing(nil), wire.AppendGoAway(nil, wire.GoAwayClose))
	seal, open := cipherPair()
	var stream []byte
	for _, f := range frames {
		stream = append(stream, f...)
	}
	sealed := SealFrames(seal, nil, stream)
	want := 0
	for _, f := range frames {
		h, _ := wire.ParseHeader(f, wire.Limits{SegmentSize: 4 * MaxRecord})
		want += SealedSize(h)
	}
	if len(sealed) != want {
		t.Fatalf("sealed stream of %d bytes, SealedSize says %d", len(sealed), want)
	}
	next := func(n int) []byte {
		t.Helper()
		rec := sealed[:n+Overhead]
		sealed = sealed[n+Overhead:]
		p, err := open.Open(nil, rec)
		if err != nil {
			t.Fatalf("record of %d bytes: %v", n, err)
		}
		return p
	}
	for i, f := range frames {
		got := next(wire.HeaderSize)
		body := int(binary.BigEndian.Uint32(got[4:8]))
		if got[0] == wire.TypeData {
			got = append(got, next(wire.DataFixedSize)...)
			for left := body - wire.DataFixedSize; ; {
				k := min(left, MaxRecord)
				got = append(got, next(k)...)
				if left -= k; left == 0 {
					break
				}
			}
		} else if body > 0 {
			got = append(got, next(body)...)
		}
		if !bytes.Equal(got, f) {
			t.Fatalf("frame %d: opened %x..., want %x...", i, got[:min(len(got), 16)], f[:min(len(f), 16)])
		}
	}
	if len(sealed) != 0 {
		t.Fatalf("%d bytes left over", len(sealed))
	}

	// Out of turn: the second record opened first, a record twice, one
	// with a bit flipped.
	seal, open = cipherPair()
	r0, r1 := seal.Seal(nil, []byte("first")), seal.Seal(nil, []byte("second"))
	if _, err := open.Open(nil, r1); !errors.Is(err, ErrAuth) {
		t.Fatalf("record 1 opened as record 0: %v, want ErrAuth", err)
	}
	if _, err := open.Open(nil, r0); err != nil {
		t.Fatal(err)
	}
	if _, err := open.Open(nil, r0); !errors.Is(err, ErrAuth) {
		t.Fatalf("record 0 replayed: %v, want ErrAuth", err)
	}
	r1[2] ^= 1
	if _, err := open.Open(nil, r1); !errors.Is(err, ErrAuth) {
		t.Fatalf("record 1 altered: %v, want ErrAuth", err)
	}
}
