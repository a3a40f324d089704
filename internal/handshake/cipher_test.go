package handshake

import (
	"bytes"
	"errors"
	"testing"

	"github.com/flynn/noise"
)

// TestCipherMatchesNoise: Cipher seals exactly as Noise's own CipherState
// does for the suite (so a peer running the library opens our frames),
// opens what it sealed, rejects a frame out of order, and allocates
// nothing per frame.
func TestCipherMatchesNoise(t *testing.T) {
	var k [32]byte
	for i := range k {
		k[i] = byte(i * 7)
	}
	ref := noise.UnsafeNewCipherState(Suite, k, 5)
	seal := NewCipher(noise.UnsafeNewCipherState(Suite, k, 5))
	open := NewCipher(noise.UnsafeNewCipherState(Suite, k, 5))
	for n := range 40 {
		pt := bytes.Repeat([]byte{byte(n)}, n*37)
		want, err := ref.Encrypt(nil, nil, pt)
		if err != nil {
			t.Fatal(err)
		}
		got := seal.Seal([]byte("prefix"), pt)
		if !bytes.Equal(got[6:], want) || string(got[:6]) != "prefix" {
			t.Fatalf("frame %d: sealed differently from the Noise library", n)
		}
		back, err := open.Open(nil, got[6:])
		if err != nil || !bytes.Equal(back, pt) {
			t.Fatalf("frame %d: open = %v, %v", n, back, err)
		}
	}
	if _, err := open.Open(nil, seal.Seal(nil, nil)[:0:0]); !errors.Is(err, ErrAuth) {
		t.Fatalf("a truncated frame opened: %v", err)
	}
	skipped := seal.Seal(nil, []byte("x")) // open's count is now behind by one
	if _, err := open.Open(nil, seal.Seal(nil, []byte("y"))); !errors.Is(err, ErrAuth) {
		t.Fatalf("a frame out of order opened: %v (skipped %d bytes)", err, len(skipped))
	}

	a, b := NewCipher(noise.UnsafeNewCipherState(Suite, k, 0)), NewCipher(noise.UnsafeNewCipherState(Suite, k, 0))
	pt := make([]byte, 64)
	buf := make([]byte, 0, 256)
	out := make([]byte, 0, 256)
	if allocs := testing.AllocsPerRun(100, func() {
		buf = a.Seal(buf[:0], pt)
		var err error
		if out, err = b.Open(out[:0], buf); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("a Seal and an Open allocate %v times, want 0", allocs)
	}
}
