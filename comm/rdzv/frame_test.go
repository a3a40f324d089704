package rdzv

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/flynn/noise"

	hs "github.com/multirail/multirail/internal/handshake"
)

func TestRdzvCardRoundTrip(t *testing.T) {
	for _, c := range []Card{
		{Rank: 0, Size: 1},
		{JobID: "job", Rank: 3, Size: 4, Data: []byte(`{"port":7000}`)},
		{JobID: strings.Repeat("j", MaxJobID), Rank: MaxSize - 1, Size: MaxSize, Data: make([]byte, 100)},
	} {
		got, err := decodeCardBody(appendCardBody(nil, c), 100)
		if err != nil || got.JobID != c.JobID || got.Rank != c.Rank || got.Size != c.Size || !bytes.Equal(got.Data, c.Data) {
			t.Errorf("%+v: %+v %v", c.Rank, got, err)
		}
		fc, ok, err := decodeFileCard(encodeFileCard([]byte("t"), c), []byte("t"))
		if err != nil || !ok || fc.Rank != c.Rank || !bytes.Equal(fc.Data, c.Data) {
			t.Errorf("file %+v: %+v %v %v", c.Rank, fc, ok, err)
		}
		if _, ok, _ := decodeFileCard(encodeFileCard([]byte("t"), c), []byte("u")); ok {
			t.Error("MAC accepted with another token")
		}
	}
}

func TestRdzvDecodeErrors(t *testing.T) {
	body := func(job string, rank, size uint32, data string) []byte {
		return appendCardBody(nil, Card{JobID: job, Rank: int(rank), Size: int(size), Data: []byte(data)})
	}
	for _, c := range []struct {
		b    []byte
		want string
	}{
		{nil, "shorter than its 10-byte header"},
		{[]byte{0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0}, "job id of 65535 bytes"},
		{[]byte{0, 5, 'a', 0, 0, 0, 0, 0, 0, 0}, "cut inside its job id"},
		{body("", 0, 0, ""), "size 0, allowed 1..1048576"},
		{body("", 4, 4, ""), "rank 4 is out of range for size 4"},
		{body("", 0, 1, "toolong"), "card data of 7 bytes, allowed at most 4"},
	} {
		if _, err := decodeCardBody(c.b, 4); !errors.Is(err, errFrame) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%x: %v; want %q", c.b, err, c.want)
		}
	}
	if _, err := decodeTable([]byte{0, 0, 0, 3}, 3); err == nil || !strings.Contains(err.Error(), "table says 3 ranks in 4 bytes") {
		t.Errorf("lying count: %v", err)
	}
	if _, err := decodeTable(encodeTable([][]byte{nil}), 2); err == nil || !strings.Contains(err.Error(), "table of 1 ranks, this job has size 2") {
		t.Errorf("wrong size: %v", err)
	}
	if _, _, err := readFrame(bytes.NewReader([]byte{0, 0, 0, 0}), 10); !errors.Is(err, errFrame) {
		t.Errorf("empty frame: %v", err)
	}
	if _, _, err := readFrame(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff}), 10); !errors.Is(err, errFrame) || !strings.Contains(err.Error(), "length 4294967295, allowed 1..10") {
		t.Errorf("huge frame: %v", err)
	}
}

func TestRdzvStatusAndRanges(t *testing.T) {
	miss := []int{0, 1, 2, 5, 7, 8}
	r := rangesOf(miss)
	if !slices.Equal(r, [][2]int{{0, 2}, {5, 5}, {7, 8}}) {
		t.Fatalf("%v", r)
	}
	if got := formatRanges(r, len(miss)); got != "0-2, 5, 7-8" {
		t.Errorf("%q", got)
	}
	if got := formatRanges(r[:1], 10); got != "0-2, ... (10 in all)" {
		t.Errorf("%q", got)
	}
	st := status{registered: 4, size: 10, missing: 6, ranges: r}
	got, err := decodeStatus(st.encode())
	if err != nil || got.registered != 4 || got.size != 10 || got.missing != 6 || !slices.Equal(got.ranges, r) {
		t.Errorf("%+v %v", got, err)
	}
	table := [][]byte{[]byte("a"), nil, []byte("ccc")}
	tb, err := decodeTable(encodeTable(table), 3)
	if err != nil || !sameTable(tb, table) {
		t.Errorf("%q %v", tb, err)
	}
}

// TestRdzvHello: the hello's magic and version, and the exact size of
// this version's hello.
func TestRdzvHello(t *testing.T) {
	if got := helloBody(); string(got) != "MRDZ\x02" {
		t.Fatalf("hello body %q", got)
	}
	for _, c := range []struct {
		b    string
		v    byte
		want string
	}{
		{"MRDZ\x02", 2, ""},
		{"MRDZ\x01" + strings.Repeat("n", 32), 1, ""}, // version 1's: the caller names the version
		{"MRDZ\x03", 3, ""},
		{"MRDZ\x02x", 2, "version 2 hello of 6 bytes, want 5"},
		{"MRDZ", 0, "without the magic"},
		{"MRDX\x02", 0, "without the magic"},
		{"", 0, "without the magic"},
	} {
		v, err := parseHello([]byte(c.b))
		if c.want == "" && (err != nil || v != c.v) || c.want != "" && (!errors.Is(err, errFrame) || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%q: %d %v; want %d %q", c.b, v, err, c.v, c.want)
		}
	}
}

// TestRdzvPSK: the handshake's pre-shared key is HMAC-SHA256(key = token,
// "multirail/rdzv 2 token") (values from openssl dgst -sha256 -hmac),
// never the transport's key for the same token.
func TestRdzvPSK(t *testing.T) {
	for tok, want := range map[string]string{
		"secret": "78008365033c271cb8ac7160bafdb1863fcd9eee8e10ad1d5ab51a74d98616ef",
		"":       "d4d57c07c75dca4c3629948e9236ed74df176b74bb2312752904e0ed8f318c6a",
	} {
		k := pskOf([]byte(tok))
		if got := hex.EncodeToString(k[:]); got != want {
			t.Errorf("pskOf(%q) = %s, want %s", tok, got, want)
		}
		if k == hs.TokenKey([]byte(tok)) {
			t.Errorf("pskOf(%q) is the transport's key", tok)
		}
	}
}

// sealPair returns the sealing and the opening Cipher of one direction,
// under a fixed key.
func sealPair() (*hs.Cipher, *hs.Cipher) {
	k := [32]byte{'r', 'd', 'z', 'v'}
	return hs.NewCipher(noise.UnsafeNewCipherState(hs.Suite, k, 0)), hs.NewCipher(noise.UnsafeNewCipherState(hs.Suite, k, 0))
}

// TestRdzvSealed: sealed frames open in order into their inner frames;
// one altered, out of turn, in clear, empty or too long does not.
func TestRdzvSealed(t *testing.T) {
	seal, open := sealPair()
	var w bytes.Buffer
	frames := []struct {
		typ  byte
		body []byte
	}{{tCard, appendCardBody(nil, Card{JobID: "j", Rank: 1, Size: 2, Data: []byte("d")})}, {tAck, nil}, {tTable, encodeTable([][]byte{[]byte("a"), nil})}}
	for _, f := range frames {
		if err := writeSealed(&w, seal, f.typ, f.body); err != nil {
			t.Fatal(err)
		}
	}
	// Length, type 9, then the inner type and body sealed, with the tag.
	first := 4 + 1 + 1 + len(frames[0].body) + 16
	if b := w.Bytes(); b[4] != tSealed || int(binary.BigEndian.Uint32(b)) != first-4 {
		t.Fatalf("sealed frame header % x, want length %d and type %d", b[:5], first-4, tSealed)
	}
	stream := bytes.Clone(w.Bytes())
	for _, f := range frames {
		typ, body, err := readSealed(&w, open, 1<<10)
		if err != nil || typ != f.typ || !bytes.Equal(body, f.body) {
			t.Fatalf("%d %x %v; want %d %x", typ, body, err, f.typ, f.body)
		}
	}
	// The second frame first: out of turn.
	_, open = sealPair()
	if _, _, err := readSealed(bytes.NewReader(stream[first:]), open, 1<<10); !errors.Is(err, hs.ErrAuth) {
		t.Errorf("frame out of turn: %v", err)
	}
	// Any byte of the first frame altered.
	for i := range first {
		b := bytes.Clone(stream[:first])
		b[i] ^= 0x40
		_, open = sealPair()
		if typ, body, err := readSealed(bytes.NewReader(b), open, 1<<10); err == nil {
			t.Fatalf("byte %d altered: %d %x opened", i, typ, body)
		} else if i >= 5 && !errors.Is(err, hs.ErrAuth) {
			t.Errorf("byte %d altered: %v, want ErrAuth", i, err)
		}
	}
	_, open = sealPair()
	if _, _, err := readSealed(bytes.NewReader(frameBytes(tCard, frames[0].body)), open, 1<<10); !errors.Is(err, errAfterHandshake) || !strings.Contains(err.Error(), "want a sealed frame (type 9)") {
		t.Errorf("clear frame: %v", err)
	}
	seal, open = sealPair()
	if _, _, err := readSealed(bytes.NewReader(frameBytes(tSealed, seal.Seal(nil, nil))), open, 1<<10); !errors.Is(err, errAfterHandshake) || !strings.Contains(err.Error(), "without an inner type") {
		t.Errorf("empty frame: %v", err)
	}
	_, open = sealPair()
	if _, _, err := readSealed(bytes.NewReader(stream), open, len(frames[0].body)); !errors.Is(err, errFrame) || !strings.Contains(err.Error(), fmt.Sprintf("allowed 1..%d", len(frames[0].body)+sealedOverhead)) {
		t.Errorf("frame too long: %v", err)
	}
}

// FuzzReadFrame: no input makes the frame reader or a decoder of the
// frames in clear (hello, noise1, noise2, error; a file:// card) panic or
// allocate past its limit, and whatever decodes encodes back to the same
// bytes.
func FuzzReadFrame(f *testing.F) {
	f.Add(frameBytes(tHello, helloBody()))
	f.Add(frameBytes(tNoise1, append([]byte{version}, make([]byte, noiseMsgLen)...)))
	f.Add(frameBytes(tNoise2, make([]byte, noiseMsgLen)))
	f.Add(frameBytes(tError, append([]byte{codeAuth}, "authentication failed"...)))
	f.Add(frameBytes(tSealed, make([]byte, 1+hs.Overhead)))
	f.Add(encodeFileCard(nil, Card{JobID: "j", Rank: 0, Size: 1}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		if c, _, err := decodeFileCard(b, nil); err == nil {
			if got := encodeFileCard(nil, c); !bytes.Equal(got[:len(got)-macSize], b[:len(b)-macSize]) {
				t.Fatalf("file card %x re-encodes as %x", b, got)
			}
		}
		typ, body, err := readFrame(bytes.NewReader(b), 1<<16)
		if err != nil {
			return
		}
		if 5+len(body) > len(b) {
			t.Fatalf("frame body of %d bytes from %d bytes of input", len(body), len(b))
		}
		switch typ {
		case tHello:
			if v, err := parseHello(body); err == nil && v == version && !bytes.Equal(body, helloBody()) {
				t.Fatalf("hello %q accepted as version %d", body, v)
			}
		case tError:
			var re *RefusedError
			if err := (&tcpClient{}).serverError(body); !errors.As(err, &re) || errors.Is(err, ErrAuth) != (len(body) > 0 && body[0] == codeAuth) {
				t.Fatalf("error frame %x: %v", body, err)
			}
		}
	})
}

// FuzzSealedFrame: an inner frame (type byte and body) sealed and read
// back gives the same frame, and its decoder does not panic and encodes
// what it decodes back to the same bytes; with one byte of the sealed
// frame flipped (flip != 0: at (flip-1) mod its length, by flip>>8 or
// 0x80), it never opens.
func FuzzSealedFrame(f *testing.F) {
	f.Add(append([]byte{tCard}, appendCardBody(nil, Card{JobID: "j", Rank: 1, Size: 2, Data: []byte("d")})...), uint32(0))
	f.Add(append([]byte{tStatus}, status{registered: 1, size: 3, missing: 2, ranges: [][2]int{{0, 0}, {2, 2}}}.encode()...), uint32(0))
	f.Add(append([]byte{tTable}, encodeTable([][]byte{[]byte("a"), nil})...), uint32(0))
	f.Add([]byte{tAck}, uint32(0))
	f.Add([]byte{}, uint32(0))
	f.Add([]byte{tAck}, uint32(6|0x100))
	f.Fuzz(func(t *testing.T, inner []byte, flip uint32) {
		const max = 1 << 16
		seal, open := sealPair()
		frame := frameBytes(tSealed, seal.Seal(nil, inner))
		if len(inner) > 0 {
			var w bytes.Buffer
			s, _ := sealPair()
			writeSealed(&w, s, inner[0], inner[1:])
			if !bytes.Equal(w.Bytes(), frame) {
				t.Fatalf("writeSealed % x, want % x", w.Bytes(), frame)
			}
		}
		if flip != 0 {
			i, x := int((flip-1)%uint32(len(frame))), byte(flip>>8)
			if x == 0 {
				x = 0x80
			}
			frame[i] ^= x
			if typ, body, err := readSealed(bytes.NewReader(frame), open, max); err == nil {
				t.Fatalf("frame with byte %d flipped opened: %d %x", i, typ, body)
			}
			return
		}
		typ, body, err := readSealed(bytes.NewReader(frame), open, max)
		if len(inner) == 0 || len(inner) > max {
			if err == nil {
				t.Fatalf("inner frame of %d bytes read", len(inner))
			}
			return
		}
		if err != nil || typ != inner[0] || !bytes.Equal(body, inner[1:]) {
			t.Fatalf("%d %x %v; want %x", typ, body, err, inner)
		}
		switch typ {
		case tCard:
			if c, err := decodeCardBody(body, DefaultMaxCard); err == nil {
				if got := appendCardBody(nil, c); !bytes.Equal(got, body) {
					t.Fatalf("card %x re-encodes as %x", body, got)
				}
			}
		case tStatus:
			if st, err := decodeStatus(body); err == nil {
				if got := st.encode(); !bytes.Equal(got, body) {
					t.Fatalf("status %x re-encodes as %x", body, got)
				}
			}
		case tTable:
			if len(body) < 4 {
				return
			}
			if table, err := decodeTable(body, int(binary.BigEndian.Uint32(body))); err == nil {
				if got := encodeTable(table); !bytes.Equal(got, body) {
					t.Fatalf("table %x re-encodes as %x", body, got)
				}
			}
		case tError:
			(&tcpClient{}).serverError(body)
		}
	})
}

func frameBytes(typ byte, body []byte) []byte {
	var b bytes.Buffer
	writeFrame(&b, typ, body)
	return b.Bytes()
}
