package wire

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

const testSeg = 1024

var testLim = Limits{SegmentSize: testSeg, MaxMessage: 1 << 20}

func seq16(start byte) (a [16]byte) {
	for i := range a {
		a[i] = start + byte(i)
	}
	return a
}

func seq32(start byte) (a [32]byte) {
	for i := range a {
		a[i] = start + byte(i)
	}
	return a
}

var (
	testHello = Hello{
		Version: Version, Flags: HelloRejoin, Rail: 2, Rails: 3,
		Session: seq16(0x00), Nonce: seq16(0x10),
		SegmentSize: 64 << 10, Window: 1 << 30, MaxMessage: 1 << 24,
	}
	testChallenge = Challenge{
		Version: Version, Nonce: seq16(0x20), Proof: seq32(0x40),
		SegmentSize: MinSegmentSize, Window: math.MaxUint64, MaxMessage: 1 << 20,
	}
	testAuth = Auth{Proof: seq32(0x80), Window: 1 << 30}
)

// dataFrame builds a whole DATA frame for d with payload p (d.Len is set
// from p).
func dataFrame(d Data, p []byte) []byte {
	d.Len = uint32(len(p))
	b := make([]byte, DataHeaderSize+len(p))
	PutData(b, d)
	copy(b[DataHeaderSize:], p)
	return b
}

func payload(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7 + 3)
	}
	return p
}

// crcData returns d with FlagCRC and the CRC of p.
func crcData(d Data, p []byte) Data {
	d.Flags |= FlagCRC
	d.CRC = Checksum(p)
	return d
}

// wantMalformed fails unless err wraps ErrMalformed (and not ErrVersion).
func wantMalformed(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("no error, want one wrapping ErrMalformed")
	}
	if !errors.Is(err, ErrMalformed) || errors.Is(err, ErrVersion) || errors.Is(err, ErrShort) {
		t.Fatalf("error %q: want it to wrap ErrMalformed only", err)
	}
}

// wantVersion fails unless err wraps ErrVersion and not ErrMalformed.
func wantVersion(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("no error, want one wrapping ErrVersion")
	}
	if !errors.Is(err, ErrVersion) || errors.Is(err, ErrMalformed) {
		t.Fatalf("error %q: want it to wrap ErrVersion only", err)
	}
}

// roundTrip is one frame built by its encoder and the check that its parser
// gives back the encoded value.
type roundTrip struct {
	name  string
	frame []byte
	typ   uint8
	check func(t *testing.T, h Header, body []byte)
}

func roundTrips() []roundTrip {
	var rts []roundTrip
	add := func(name string, frame []byte, typ uint8, check func(*testing.T, Header, []byte)) {
		rts = append(rts, roundTrip{name, frame, typ, check})
	}

	for _, m := range []Hello{
		testHello,
		{Version: Version, Rail: 0, Rails: 1, SegmentSize: MinSegmentSize},
		{Version: Version, Rail: math.MaxUint16 - 1, Rails: math.MaxUint16, Session: seq16(0xf0), Nonce: seq16(0xe0), SegmentSize: MaxSegmentSize, Window: math.MaxUint64, MaxMessage: math.MaxUint64},
	} {
		add(fmt.Sprintf("hello/rail=%d/%d", m.Rail, m.Rails), AppendHello(nil, m), TypeHello, func(t *testing.T, _ Header, body []byte) {
			got, err := ParseHello(body)
			if err != nil || got != m {
				t.Fatalf("ParseHello = %+v, %v; want %+v", got, err, m)
			}
		})
	}
	for _, m := range []Challenge{
		testChallenge,
		{Version: Version, SegmentSize: MaxSegmentSize, MaxMessage: math.MaxUint64},
	} {
		add(fmt.Sprintf("challenge/seg=%d", m.SegmentSize), AppendChallenge(nil, m), TypeChallenge, func(t *testing.T, _ Header, body []byte) {
			got, err := ParseChallenge(body)
			if err != nil || got != m {
				t.Fatalf("ParseChallenge = %+v, %v; want %+v", got, err, m)
			}
		})
	}
	for _, m := range []Auth{testAuth, {}} {
		add(fmt.Sprintf("auth/window=%d", m.Window), AppendAuth(nil, m), TypeAuth, func(t *testing.T, _ Header, body []byte) {
			got, err := ParseAuth(body)
			if err != nil || got != m {
				t.Fatalf("ParseAuth = %+v, %v; want %+v", got, err, m)
			}
		})
	}
	add("welcome", AppendWelcome(nil), TypeWelcome, func(t *testing.T, h Header, _ []byte) {
		if h.Len != 0 {
			t.Fatalf("welcome body of %d bytes", h.Len)
		}
	})
	for _, m := range []Reject{
		{Code: RejectVersion},
		{Code: RejectAuth, Reason: "bad proof"},
		{Code: RejectBusy, Reason: strings.Repeat("x", MaxReason)},
		{Code: math.MaxUint16, Reason: "\x00\xff not utf-8"},
	} {
		add(fmt.Sprintf("reject/code=%d/reason=%d", m.Code, len(m.Reason)), AppendReject(nil, m), TypeReject, func(t *testing.T, _ Header, body []byte) {
			got, err := ParseReject(body)
			if err != nil || got != m {
				t.Fatalf("ParseReject = %+v, %v; want %+v", got, err, m)
			}
		})
	}
	for _, a := range []Ack{{}, {Received: 7, Credit: 1 << 40}, {Received: math.MaxUint64, Credit: math.MaxUint64}} {
		add(fmt.Sprintf("ack/%d", a.Received), AppendAck(nil, a), TypeAck, func(t *testing.T, _ Header, body []byte) {
			got, err := ParseAck(body)
			if err != nil || got != a {
				t.Fatalf("ParseAck = %+v, %v; want %+v", got, err, a)
			}
		})
	}
	for _, code := range []uint16{GoAwayClose, GoAwayProtocol, math.MaxUint16} {
		add(fmt.Sprintf("goaway/%d", code), AppendGoAway(nil, code), TypeGoAway, func(t *testing.T, _ Header, body []byte) {
			got, err := ParseGoAway(body)
			if err != nil || got != code {
				t.Fatalf("ParseGoAway = %d, %v; want %d", got, err, code)
			}
		})
	}
	add("ping", AppendPing(nil), TypePing, func(t *testing.T, h Header, _ []byte) {
		if h.Len != 0 {
			t.Fatalf("ping body of %d bytes", h.Len)
		}
	})

	type dataCase struct {
		name string
		d    Data
		p    []byte
	}
	base := Data{Session: 0x0123456789abcdef, Message: 1, Tag: 42, Total: 3000}
	with := func(f func(*Data)) Data { d := base; f(&d); return d }
	for _, c := range []dataCase{
		{"first", with(func(d *Data) {}), payload(testSeg)},
		{"middle", with(func(d *Data) { d.Offset = testSeg }), payload(testSeg)},
		{"last", with(func(d *Data) { d.Offset = 2 * testSeg }), payload(3000 - 2*testSeg)},
		{"last-full", with(func(d *Data) { d.Total = 2 * testSeg; d.Offset = testSeg }), payload(testSeg)},
		{"single-byte", with(func(d *Data) { d.Total = 1 }), payload(1)},
		{"empty", with(func(d *Data) { d.Total = 0 }), nil},
		{"max-message", with(func(d *Data) { d.Total = uint64(testLim.MaxMessage); d.Offset = uint64(testLim.MaxMessage) - testSeg }), payload(testSeg)},
		{"max-fields", with(func(d *Data) { d.Session = math.MaxUint64; d.Message = math.MaxUint64; d.Tag = math.MaxUint32 }), payload(testSeg)},
		{"crc", crcData(with(func(d *Data) { d.Offset = 2 * testSeg }), payload(3000-2*testSeg)), payload(3000 - 2*testSeg)},
		{"crc-empty", crcData(with(func(d *Data) { d.Total = 0 }), nil), nil},
	} {
		frame := dataFrame(c.d, c.p)
		want := c.d
		want.Len = uint32(len(c.p))
		add("data/"+c.name, frame, TypeData, func(t *testing.T, h Header, body []byte) {
			got, err := ParseData(h, body[:DataFixedSize], testLim)
			if err != nil || got != want {
				t.Fatalf("ParseData = %+v, %v; want %+v", got, err, want)
			}
			if !bytes.Equal(body[DataFixedSize:], c.p) {
				t.Fatal("payload changed")
			}
		})
	}
	return rts
}

func TestRoundTrip(t *testing.T) {
	for _, rt := range roundTrips() {
		t.Run(rt.name, func(t *testing.T) {
			h, err := ParseHeader(rt.frame, testLim)
			if err != nil {
				t.Fatalf("ParseHeader: %v", err)
			}
			if h.Type != rt.typ || int(h.Len) != len(rt.frame)-HeaderSize {
				t.Fatalf("header %+v for a %d-byte frame of type %#x", h, len(rt.frame), rt.typ)
			}
			dh, n, err := DecodeFrame(rt.frame, testLim)
			if err != nil || n != len(rt.frame) || dh != h {
				t.Fatalf("DecodeFrame = %+v, %d, %v; want %+v, %d, nil", dh, n, err, h, len(rt.frame))
			}
			rt.check(t, h, rt.frame[HeaderSize:])

			// Trailing bytes belong to the next frame.
			long := append(append([]byte{}, rt.frame...), AppendPing(nil)...)
			if _, n, err := DecodeFrame(long, testLim); err != nil || n != len(rt.frame) {
				t.Fatalf("DecodeFrame with a frame behind = %d, %v", n, err)
			}
			// Every proper prefix is incomplete, not malformed.
			for i := range len(rt.frame) {
				if _, n, err := DecodeFrame(rt.frame[:i], testLim); err != ErrShort || n != 0 {
					t.Fatalf("DecodeFrame of %d of %d bytes = %d, %v; want 0, ErrShort", i, len(rt.frame), n, err)
				}
			}
		})
	}
}

func TestDecodeStream(t *testing.T) {
	var stream []byte
	var types []uint8
	for _, rt := range roundTrips() {
		stream = append(stream, rt.frame...)
		types = append(types, rt.typ)
	}
	for i, typ := range types {
		h, n, err := DecodeFrame(stream, testLim)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if h.Type != typ {
			t.Fatalf("frame %d: type %#x, want %#x", i, h.Type, typ)
		}
		stream = stream[n:]
	}
	if len(stream) != 0 {
		t.Fatalf("%d bytes left", len(stream))
	}
	if _, _, err := DecodeFrame(stream, testLim); err != ErrShort {
		t.Fatalf("empty stream: %v, want ErrShort", err)
	}
}

func TestAppendKeepsPrefix(t *testing.T) {
	prefix := []byte("prefix")
	for name, f := range map[string]func([]byte) []byte{
		"hello":     func(b []byte) []byte { return AppendHello(b, testHello) },
		"challenge": func(b []byte) []byte { return AppendChallenge(b, testChallenge) },
		"auth":      func(b []byte) []byte { return AppendAuth(b, testAuth) },
		"welcome":   AppendWelcome,
		"reject":    func(b []byte) []byte { return AppendReject(b, Reject{Code: 1, Reason: "r"}) },
		"ack":       func(b []byte) []byte { return AppendAck(b, Ack{Received: 1, Credit: 2}) },
		"goaway":    func(b []byte) []byte { return AppendGoAway(b, 1) },
		"ping":      AppendPing,
	} {
		got := f(append([]byte{}, prefix...))
		want := append(append([]byte{}, prefix...), f(nil)...)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: appending to a prefix gives %x, want %x", name, got, want)
		}
	}
}

func TestRejectReasonCut(t *testing.T) {
	long := strings.Repeat("abcdefgh", MaxReason/8+10)
	frame := AppendReject(nil, Reject{Code: RejectProtocol, Reason: long})
	if len(frame) != HeaderSize+2+MaxReason {
		t.Fatalf("frame of %d bytes, want %d", len(frame), HeaderSize+2+MaxReason)
	}
	if _, n, err := DecodeFrame(frame, Limits{}); err != nil || n != len(frame) {
		t.Fatalf("DecodeFrame = %d, %v", n, err)
	}
	got, err := ParseReject(frame[HeaderSize:])
	if err != nil || got.Code != RejectProtocol || got.Reason != long[:MaxReason] {
		t.Fatalf("ParseReject = %+v, %v", got, err)
	}
}

// TestGolden pins the byte layout that docs/wire.md specifies.
func TestGolden(t *testing.T) {
	for _, c := range []struct {
		name  string
		frame []byte
		hex   string
	}{
		{"hello", AppendHello(nil, testHello),
			"01000000" + "00000040" + "4d524c59" + "0301" + "0002" + "0003" + "0000" +
				"000102030405060708090a0b0c0d0e0f" + "101112131415161718191a1b1c1d1e1f" +
				"00010000" + "0000000040000000" + "0000000001000000"},
		{"challenge", AppendChallenge(nil, testChallenge),
			"02000000" + "00000048" + "03000000" + "202122232425262728292a2b2c2d2e2f" +
				"404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f" +
				"00000200" + "ffffffffffffffff" + "0000000000100000"},
		{"auth", AppendAuth(nil, testAuth),
			"03000000" + "00000028" +
				"808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f" + "0000000040000000"},
		{"welcome", AppendWelcome(nil), "04000000" + "00000000"},
		{"reject", AppendReject(nil, Reject{Code: RejectAuth, Reason: "no"}), "05000000" + "00000004" + "0002" + "6e6f"},
		{"data", dataFrame(crcData(Data{Session: 0x0102030405060708, Message: 9, Tag: 7, Total: 3, Offset: 0}, []byte("abc")), []byte("abc")),
			"10010000" + "0000002b" + "0102030405060708" + "0000000000000009" + "00000007" + "364b3fb7" +
				"0000000000000003" + "0000000000000000" + "616263"},
		{"ack", AppendAck(nil, Ack{Received: 5, Credit: 0x10000}), "11000000" + "00000010" + "0000000000000005" + "0000000000010000"},
		{"goaway", AppendGoAway(nil, GoAwayProtocol), "12000000" + "00000002" + "0001"},
		{"ping", AppendPing(nil), "13000000" + "00000000"},
	} {
		if got := hex.EncodeToString(c.frame); got != c.hex {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.hex)
		}
		if _, n, err := DecodeFrame(c.frame, testLim); err != nil || n != len(c.frame) {
			t.Errorf("%s: DecodeFrame = %d, %v", c.name, n, err)
		}
	}
}

func TestSizes(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"HelloSize", HelloSize, 64},
		{"ChallengeSize", ChallengeSize, 72},
		{"AuthSize", AuthSize, 40},
		{"DataFixedSize", DataFixedSize, 40},
		{"DataHeaderSize", DataHeaderSize, 48},
		{"AckSize", AckSize, 16},
		{"GoAwaySize", GoAwaySize, 2},
		{"MaxControlBody", MaxControlBody, 258},
		{"len(hello frame)", len(AppendHello(nil, testHello)), HeaderSize + HelloSize},
		{"len(challenge frame)", len(AppendChallenge(nil, testChallenge)), HeaderSize + ChallengeSize},
		{"len(auth frame)", len(AppendAuth(nil, testAuth)), HeaderSize + AuthSize},
		{"len(ack frame)", len(AppendAck(nil, Ack{})), HeaderSize + AckSize},
		{"len(goaway frame)", len(AppendGoAway(nil, 0)), HeaderSize + GoAwaySize},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
}

func TestChecksum(t *testing.T) {
	if got := Checksum([]byte("123456789")); got != 0xE3069283 {
		t.Errorf("Checksum(%q) = %#08x, want 0xe3069283 (CRC-32C check value)", "123456789", got)
	}
	if got := Checksum(nil); got != 0 {
		t.Errorf("Checksum(nil) = %#x, want 0", got)
	}
	if got := Checksum(make([]byte, 32)); got != 0x8A9136AA {
		t.Errorf("Checksum(32 zero bytes) = %#08x, want 0x8a9136aa (RFC 3720 B.4)", got)
	}
}

// hdr builds 8 header bytes with explicit reserved bytes.
func hdr(typ, flags, r2, r3 uint8, n uint32) []byte {
	return []byte{typ, flags, r2, r3, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
}

func TestParseHeaderAccepts(t *testing.T) {
	for _, c := range []struct {
		name string
		b    []byte
		lim  Limits
	}{
		{"hello", hdr(TypeHello, 0, 0, 0, HelloSize), Limits{}},
		{"challenge", hdr(TypeChallenge, 0, 0, 0, ChallengeSize), Limits{}},
		{"auth", hdr(TypeAuth, 0, 0, 0, AuthSize), Limits{}},
		{"welcome", hdr(TypeWelcome, 0, 0, 0, 0), Limits{}},
		{"reject-min", hdr(TypeReject, 0, 0, 0, 2), Limits{}},
		{"reject-max", hdr(TypeReject, 0, 0, 0, MaxControlBody), Limits{}},
		{"ack", hdr(TypeAck, 0, 0, 0, AckSize), Limits{}},
		{"goaway", hdr(TypeGoAway, 0, 0, 0, GoAwaySize), Limits{}},
		{"ping", hdr(TypePing, 0, 0, 0, 0), Limits{}},
		{"data-empty", hdr(TypeData, 0, 0, 0, DataFixedSize), testLim},
		{"data-full", hdr(TypeData, 0, 0, 0, DataFixedSize+testSeg), testLim},
		{"data-crc", hdr(TypeData, FlagCRC, 0, 0, DataFixedSize+1), testLim},
		{"data-max-segment", hdr(TypeData, 0, 0, 0, DataFixedSize+MaxSegmentSize), Limits{SegmentSize: MaxSegmentSize}},
		{"longer-buffer", append(hdr(TypePing, 0, 0, 0, 0), 0xff, 0xff), Limits{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, err := ParseHeader(c.b, c.lim)
			if err != nil {
				t.Fatal(err)
			}
			want := Header{Type: c.b[0], Flags: c.b[1], Len: uint32(c.b[4])<<24 | uint32(c.b[5])<<16 | uint32(c.b[6])<<8 | uint32(c.b[7])}
			if h != want {
				t.Fatalf("ParseHeader = %+v, want %+v", h, want)
			}
		})
	}
}

func TestParseHeaderRejects(t *testing.T) {
	type tc struct {
		name string
		b    []byte
		lim  Limits
	}
	cases := []tc{
		{"empty", nil, testLim},
		{"short", hdr(TypePing, 0, 0, 0, 0)[:HeaderSize-1], testLim},
		{"reserved-2", hdr(TypePing, 0, 1, 0, 0), testLim},
		{"reserved-3", hdr(TypePing, 0, 0, 0x80, 0), testLim},
		{"reserved-data", hdr(TypeData, 0, 0, 1, DataFixedSize), testLim},
		{"data-flag-4", hdr(TypeData, 0x04, 0, 0, DataFixedSize), testLim},
		{"data-flag-80", hdr(TypeData, 0x80|FlagCRC, 0, 0, DataFixedSize), testLim},
		{"data-len-0", hdr(TypeData, 0, 0, 0, 0), testLim},
		{"data-len-39", hdr(TypeData, 0, 0, 0, DataFixedSize-1), testLim},
		{"data-len-span+1", hdr(TypeData, 0, 0, 0, DataFixedSize+uint32(MaxPayload(testSeg))+1), testLim},
		{"data-len-max", hdr(TypeData, 0, 0, 0, math.MaxUint32), testLim},
		{"data-no-limits", hdr(TypeData, 0, 0, 0, DataFixedSize), Limits{}},
		{"data-negative-segment", hdr(TypeData, 0, 0, 0, 1<<31), Limits{SegmentSize: -1000, MaxMessage: -1}},
		{"reject-len-0", hdr(TypeReject, 0, 0, 0, 0), testLim},
		{"reject-len-1", hdr(TypeReject, 0, 0, 0, 1), testLim},
		{"reject-len-259", hdr(TypeReject, 0, 0, 0, MaxControlBody+1), testLim},
		{"reject-len-max", hdr(TypeReject, 0, 0, 0, math.MaxUint32), testLim},
	}
	for _, typ := range []uint8{0x00, 0x06, 0x0f, 0x14, TypeFeedback, 0x21, 0xff} {
		cases = append(cases, tc{fmt.Sprintf("type-%#02x", typ), hdr(typ, 0, 0, 0, 0), testLim})
	}
	fixed := map[uint8]uint32{
		TypeHello: HelloSize, TypeChallenge: ChallengeSize, TypeAuth: AuthSize, TypeWelcome: 0,
		TypeAck: AckSize, TypeGoAway: GoAwaySize, TypePing: 0,
	}
	for typ, size := range fixed {
		for _, n := range []uint32{size + 1, size + MaxControlBody, math.MaxUint32} {
			cases = append(cases, tc{fmt.Sprintf("type-%#02x-len-%d", typ, n), hdr(typ, 0, 0, 0, n), testLim})
		}
		if size > 0 {
			cases = append(cases,
				tc{fmt.Sprintf("type-%#02x-len-%d", typ, size-1), hdr(typ, 0, 0, 0, size-1), testLim},
				tc{fmt.Sprintf("type-%#02x-len-0", typ), hdr(typ, 0, 0, 0, 0), testLim})
		}
	}
	for _, typ := range []uint8{TypeHello, TypeChallenge, TypeAuth, TypeWelcome, TypeReject, TypeAck, TypeGoAway, TypePing} {
		n := fixed[typ]
		if typ == TypeReject {
			n = 2
		}
		for _, fl := range []uint8{FlagCRC, 0x80} {
			cases = append(cases, tc{fmt.Sprintf("type-%#02x-flags-%#02x", typ, fl), hdr(typ, fl, 0, 0, n), testLim})
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseHeader(c.b, c.lim)
			wantMalformed(t, err)
			// DecodeFrame says "short" for fewer than HeaderSize bytes and
			// rejects every bad header before waiting for its body.
			_, n, err := DecodeFrame(c.b, c.lim)
			if n != 0 {
				t.Fatalf("DecodeFrame consumed %d bytes", n)
			}
			if len(c.b) < HeaderSize {
				if err != ErrShort {
					t.Fatalf("DecodeFrame: %v, want ErrShort", err)
				}
				return
			}
			wantMalformed(t, err)
		})
	}
}

// mutate returns a copy of b changed by f.
func mutate(b []byte, f func(b []byte)) []byte {
	c := append([]byte{}, b...)
	f(c)
	return c
}

func put16(b []byte, off int, v uint16) { b[off], b[off+1] = byte(v>>8), byte(v) }

func put32(b []byte, off int, v uint32) {
	b[off], b[off+1], b[off+2], b[off+3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
}

// bodyCase is a body for one parser and the error class it must produce.
type bodyCase struct {
	name    string
	body    []byte
	version bool // want ErrVersion instead of ErrMalformed
}

func checkBodies(t *testing.T, typ uint8, parse func([]byte) error, cases []bodyCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			check := wantMalformed
			if c.version {
				check = wantVersion
			}
			check(t, parse(c.body))
			// Through DecodeFrame, with a header that fits when the length
			// is allowed for the type, the body parser decides.
			frame := append(hdr(typ, 0, 0, 0, uint32(len(c.body))), c.body...)
			if _, err := ParseHeader(frame, testLim); err != nil {
				return
			}
			_, n, err := DecodeFrame(frame, testLim)
			if n != 0 {
				t.Fatalf("DecodeFrame consumed %d bytes", n)
			}
			check(t, err)
		})
	}
}

func TestParseHelloRejects(t *testing.T) {
	good := AppendHello(nil, testHello)[HeaderSize:]
	if _, err := ParseHello(good); err != nil {
		t.Fatal(err)
	}
	m := func(f func(b []byte)) []byte { return mutate(good, f) }
	rails := func(rail, n uint16) []byte {
		return m(func(b []byte) { put16(b, 6, rail); put16(b, 8, n) })
	}
	seg := func(s uint32) []byte { return m(func(b []byte) { put32(b, 44, s) }) }
	cases := []bodyCase{
		{"empty", nil, false},
		{"short", good[:HelloSize-1], false},
		{"long", append(append([]byte{}, good...), 0), false},
		{"version-0", m(func(b []byte) { b[4] = 0 }), true},
		{"version-1", m(func(b []byte) { b[4] = 1 }), true},
		{"version-2", m(func(b []byte) { b[4] = 2 }), true},
		{"version-4", m(func(b []byte) { b[4] = 4 }), true},
		{"version-255", m(func(b []byte) { b[4] = 255 }), true},
		// A later version may use the reserved bytes: the version wins.
		{"version-4-reserved", m(func(b []byte) { b[4] = 4; b[5] = 0xfe; b[10] = 1; b[11] = 1 }), true},
		{"version-4-rails-0", m(func(b []byte) { b[4] = 4; put16(b, 8, 0) }), true},
		// But without the magic it is not a multirail peer at all.
		{"magic-and-version", m(func(b []byte) { b[0] = 'X'; b[4] = 3 }), false},
		{"flags-2", m(func(b []byte) { b[5] = 2 }), false},
		{"flags-80", m(func(b []byte) { b[5] = 0x80 }), false},
		{"reserved-10", m(func(b []byte) { b[10] = 1 }), false},
		{"reserved-11", m(func(b []byte) { b[11] = 0x80 }), false},
		{"rails-0", rails(0, 0), false},
		{"rail-eq-rails", rails(3, 3), false},
		{"rail-gt-rails", rails(4, 3), false},
		{"rail-max", rails(math.MaxUint16, math.MaxUint16), false},
		{"rail-1-of-0", rails(1, 0), false},
		{"segment-0", seg(0), false},
		{"segment-min-1", seg(MinSegmentSize - 1), false},
		{"segment-max+1", seg(MaxSegmentSize + 1), false},
		{"segment-uint32-max", seg(math.MaxUint32), false},
	}
	for i := range 4 {
		cases = append(cases, bodyCase{fmt.Sprintf("magic-%d", i), m(func(b []byte) { b[i] ^= 0x20 }), false})
	}
	checkBodies(t, TypeHello, func(b []byte) error { _, err := ParseHello(b); return err }, cases)

	// The version error carries the peer's version.
	got, err := ParseHello(m(func(b []byte) { b[4] = 7 }))
	if !errors.Is(err, ErrVersion) || got.Version != 7 {
		t.Errorf("ParseHello of version 7 = %+v, %v; want Version 7 and ErrVersion", got, err)
	}
	// Edges that are allowed.
	for _, b := range [][]byte{rails(0, 1), rails(math.MaxUint16-1, math.MaxUint16), seg(MinSegmentSize), seg(MaxSegmentSize)} {
		if _, err := ParseHello(b); err != nil {
			t.Errorf("ParseHello(%x): %v", b, err)
		}
	}
}

func TestParseChallengeRejects(t *testing.T) {
	good := AppendChallenge(nil, testChallenge)[HeaderSize:]
	if _, err := ParseChallenge(good); err != nil {
		t.Fatal(err)
	}
	m := func(f func(b []byte)) []byte { return mutate(good, f) }
	seg := func(s uint32) []byte { return m(func(b []byte) { put32(b, 52, s) }) }
	checkBodies(t, TypeChallenge, func(b []byte) error { _, err := ParseChallenge(b); return err }, []bodyCase{
		{"empty", nil, false},
		{"short", good[:ChallengeSize-1], false},
		{"long", append(append([]byte{}, good...), 0), false},
		{"version-0", m(func(b []byte) { b[0] = 0 }), true},
		{"version-1", m(func(b []byte) { b[0] = 1 }), true},
		{"version-2", m(func(b []byte) { b[0] = 2 }), true},
		{"version-4", m(func(b []byte) { b[0] = 4 }), true},
		{"version-4-reserved", m(func(b []byte) { b[0] = 4; b[1] = 1 }), true},
		{"reserved-1", m(func(b []byte) { b[1] = 1 }), false},
		{"reserved-2", m(func(b []byte) { b[2] = 1 }), false},
		{"reserved-3", m(func(b []byte) { b[3] = 0x80 }), false},
		{"segment-0", seg(0), false},
		{"segment-min-1", seg(MinSegmentSize - 1), false},
		{"segment-max+1", seg(MaxSegmentSize + 1), false},
		{"segment-uint32-max", seg(math.MaxUint32), false},
	})
	got, err := ParseChallenge(m(func(b []byte) { b[0] = 9 }))
	if !errors.Is(err, ErrVersion) || got.Version != 9 {
		t.Errorf("ParseChallenge of version 9 = %+v, %v; want Version 9 and ErrVersion", got, err)
	}
	for _, b := range [][]byte{seg(MinSegmentSize), seg(MaxSegmentSize)} {
		if _, err := ParseChallenge(b); err != nil {
			t.Errorf("ParseChallenge(%x): %v", b, err)
		}
	}
}

func TestParseFixedRejects(t *testing.T) {
	lengths := func(size int) []bodyCase {
		return []bodyCase{
			{"empty", nil, false},
			{"short", make([]byte, size-1), false},
			{"long", make([]byte, size+1), false},
		}
	}
	t.Run("auth", func(t *testing.T) {
		checkBodies(t, TypeAuth, func(b []byte) error { _, err := ParseAuth(b); return err }, lengths(AuthSize))
	})
	t.Run("ack", func(t *testing.T) {
		checkBodies(t, TypeAck, func(b []byte) error { _, err := ParseAck(b); return err }, lengths(AckSize))
	})
	t.Run("goaway", func(t *testing.T) {
		checkBodies(t, TypeGoAway, func(b []byte) error { _, err := ParseGoAway(b); return err }, lengths(GoAwaySize))
	})
	t.Run("reject", func(t *testing.T) {
		checkBodies(t, TypeReject, func(b []byte) error { _, err := ParseReject(b); return err }, []bodyCase{
			{"empty", nil, false},
			{"short", []byte{0}, false},
			{"long", make([]byte, 2+MaxReason+1), false},
			{"huge", make([]byte, 1<<16), false},
		})
	})
}

// dataFixed returns the header and fixed part PutData makes for d.
func dataFixed(d Data) (Header, []byte) {
	b := make([]byte, DataHeaderSize)
	PutData(b, d)
	return Header{Type: TypeData, Flags: d.Flags, Len: DataFixedSize + d.Len}, b[HeaderSize:]
}

func TestParseData(t *testing.T) {
	const total = 3000 // segments 0+1024, 1024+1024, 2048+952
	base := Data{Session: 0xfeedface, Message: 5, Tag: 3, Total: total, Len: testSeg}
	type tc struct {
		name string
		d    Data
		lim  Limits
	}
	with := func(f func(*Data)) Data { d := base; f(&d); return d }
	lim := func(seg int, max int64) Limits { return Limits{SegmentSize: seg, MaxMessage: max} }

	good := []tc{
		{"first", base, testLim},
		{"middle", with(func(d *Data) { d.Offset = testSeg }), testLim},
		{"last", with(func(d *Data) { d.Offset = 2 * testSeg; d.Len = total - 2*testSeg }), testLim},
		{"last-full", with(func(d *Data) { d.Total = 2 * testSeg; d.Offset = testSeg }), testLim},
		{"one-segment", with(func(d *Data) { d.Total = testSeg }), testLim},
		{"one-byte", with(func(d *Data) { d.Total = 1; d.Len = 1 }), testLim},
		{"empty", with(func(d *Data) { d.Total = 0; d.Len = 0 }), testLim},
		{"empty-max-0", with(func(d *Data) { d.Total = 0; d.Len = 0 }), lim(testSeg, 0)},
		{"total-eq-max", with(func(d *Data) { d.Total = 1 << 20; d.Offset = 1<<20 - testSeg }), testLim},
		{"crc-flag-crc-0", with(func(d *Data) { d.Flags = FlagCRC }), testLim},
		{"crc", with(func(d *Data) { d.Flags = FlagCRC; d.CRC = 0xdeadbeef }), testLim},
		{"max-ids", with(func(d *Data) { d.Session = math.MaxUint64; d.Message = math.MaxUint64; d.Tag = math.MaxUint32 }), testLim},
		{"odd-segment-size", with(func(d *Data) { d.Offset = 1000; d.Len = 1000 }), lim(1000, 1<<20)},
		// Spans: several consecutive segments in one frame.
		{"span-2", with(func(d *Data) { d.Len = 2 * testSeg }), testLim},
		{"span-rest", with(func(d *Data) { d.Offset = testSeg; d.Len = total - testSeg }), testLim},
		{"span-whole", with(func(d *Data) { d.Len = total }), testLim},
		{"span-max", with(func(d *Data) { d.Total = 1 << 20; d.Len = uint32(MaxPayload(testSeg)) }), testLim},
		{"no-max-message", with(func(d *Data) {
			d.Total = math.MaxUint64
			d.Offset = math.MaxUint64 &^ (testSeg - 1)
			d.Len = testSeg - 1
		}), lim(testSeg, -1)},
	}
	for _, c := range good {
		t.Run("ok/"+c.name, func(t *testing.T) {
			h, fixed := dataFixed(c.d)
			got, err := ParseData(h, fixed, c.lim)
			if err != nil || got != c.d {
				t.Fatalf("ParseData = %+v, %v; want %+v", got, err, c.d)
			}
		})
	}

	bad := []tc{
		{"crc-without-flag", with(func(d *Data) { d.CRC = 1 }), testLim},
		{"message-0", with(func(d *Data) { d.Message = 0 }), testLim},
		{"message-0-empty", with(func(d *Data) { d.Message = 0; d.Total = 0; d.Len = 0 }), testLim},
		{"segment-size-0", base, lim(0, 1<<20)},
		{"segment-size-negative", base, lim(-testSeg, 1<<20)},
		{"total-gt-max", with(func(d *Data) { d.Total = 1<<20 + 1 }), testLim},
		{"total-max-uint64", with(func(d *Data) { d.Total = math.MaxUint64 }), testLim},
		{"max-message-0", with(func(d *Data) { d.Total = 1; d.Len = 1 }), lim(testSeg, 0)},
		{"offset-1", with(func(d *Data) { d.Offset = 1 }), testLim},
		{"offset-seg-1", with(func(d *Data) { d.Offset = testSeg - 1 }), testLim},
		{"offset-seg+1", with(func(d *Data) { d.Offset = testSeg + 1; d.Len = testSeg }), testLim},
		{"offset-eq-total", with(func(d *Data) { d.Total = 2 * testSeg; d.Offset = 2 * testSeg; d.Len = 0 }), testLim},
		{"offset-gt-total", with(func(d *Data) { d.Offset = 3 * testSeg; d.Len = 0 }), testLim},
		{"offset-huge", with(func(d *Data) { d.Offset = math.MaxUint64 &^ (testSeg - 1) }), testLim},
		{"short-not-last", with(func(d *Data) { d.Len = testSeg - 1 }), testLim},
		{"zero-not-last", with(func(d *Data) { d.Len = 0 }), testLim},
		{"long-last", with(func(d *Data) { d.Offset = 2 * testSeg; d.Len = testSeg }), testLim},
		{"span-not-multiple", with(func(d *Data) { d.Len = testSeg + 1 }), testLim},
		{"span-beyond-rest", with(func(d *Data) { d.Offset = testSeg; d.Len = 2 * testSeg }), testLim},
		{"span-beyond-max", with(func(d *Data) { d.Total = 4 << 20; d.Len = uint32(MaxPayload(testSeg)) + testSeg }), lim(testSeg, 8<<20)},
		{"short-last", with(func(d *Data) { d.Offset = 2 * testSeg; d.Len = total - 2*testSeg - 1 }), testLim},
		{"long-single", with(func(d *Data) { d.Total = 10; d.Len = 11 }), testLim},
		{"empty-with-payload", with(func(d *Data) { d.Total = 0; d.Len = 1 }), testLim},
		{"empty-at-offset", with(func(d *Data) { d.Total = 0; d.Offset = testSeg; d.Len = 0 }), testLim},
		{"non-empty-no-payload", with(func(d *Data) { d.Total = 1; d.Len = 0 }), testLim},
	}
	for _, c := range bad {
		t.Run("bad/"+c.name, func(t *testing.T) {
			h, fixed := dataFixed(c.d)
			_, err := ParseData(h, fixed, c.lim)
			wantMalformed(t, err)

			// DecodeFrame rejects the whole frame too (ParseHeader may
			// already).
			frame := dataFrame(c.d, payload(int(c.d.Len)))
			_, n, err := DecodeFrame(frame, c.lim)
			if n != 0 {
				t.Fatalf("DecodeFrame consumed %d bytes", n)
			}
			wantMalformed(t, err)
		})
	}

	// The fixed part and the header length are checked on their own.
	h, fixed := dataFixed(base)
	for _, c := range []struct {
		name  string
		h     Header
		fixed []byte
	}{
		{"fixed-empty", h, nil},
		{"fixed-short", h, fixed[:DataFixedSize-1]},
		{"fixed-long", h, append(append([]byte{}, fixed...), 0)},
		{"header-len-0", Header{Type: TypeData}, fixed},
		{"header-len-39", Header{Type: TypeData, Len: DataFixedSize - 1}, fixed},
	} {
		t.Run("bad/"+c.name, func(t *testing.T) {
			_, err := ParseData(c.h, c.fixed, testLim)
			wantMalformed(t, err)
		})
	}
}

func TestDecodeFrameChecksum(t *testing.T) {
	p := payload(3000 - 2*testSeg)
	d := crcData(Data{Session: 1, Message: 1, Total: 3000, Offset: 2 * testSeg}, p)
	good := dataFrame(d, p)
	if _, n, err := DecodeFrame(good, testLim); err != nil || n != len(good) {
		t.Fatalf("good frame: %d, %v", n, err)
	}
	for _, c := range []struct {
		name  string
		frame []byte
	}{
		{"payload-flipped", mutate(good, func(b []byte) { b[DataHeaderSize+10] ^= 1 })},
		{"payload-last-byte", mutate(good, func(b []byte) { b[len(b)-1] ^= 0x80 })},
		{"crc-flipped", mutate(good, func(b []byte) { b[HeaderSize+20] ^= 1 })},
		{"crc-zero", dataFrame(Data{Flags: FlagCRC, Session: 1, Message: 1, Total: 3000, Offset: 2 * testSeg}, p)},
		{"crc-of-empty-on-data", dataFrame(Data{Flags: FlagCRC, CRC: 1, Message: 1, Total: 0}, nil)},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, n, err := DecodeFrame(c.frame, testLim)
			if n != 0 {
				t.Fatalf("consumed %d bytes", n)
			}
			wantMalformed(t, err)
		})
	}
	// Without FlagCRC the payload is not checked.
	plain := dataFrame(Data{Session: 1, Message: 1, Total: 3000, Offset: 2 * testSeg}, p)
	plain[len(plain)-1] ^= 0xff
	if _, _, err := DecodeFrame(plain, testLim); err != nil {
		t.Fatalf("frame without FlagCRC: %v", err)
	}
}

func TestErrShortIsNotMalformed(t *testing.T) {
	if errors.Is(ErrShort, ErrMalformed) || errors.Is(ErrMalformed, ErrShort) || errors.Is(ErrVersion, ErrMalformed) {
		t.Fatal("ErrShort, ErrMalformed and ErrVersion must be distinct")
	}
	// A header that announces more bytes than arrived is short, even a
	// huge DATA frame, as long as the header is acceptable.
	lim := Limits{SegmentSize: MaxSegmentSize, MaxMessage: 1 << 40}
	b := hdr(TypeData, 0, 0, 0, DataFixedSize+MaxSegmentSize)
	if _, n, err := DecodeFrame(b, lim); err != ErrShort || n != 0 {
		t.Fatalf("DecodeFrame = %d, %v; want 0, ErrShort", n, err)
	}
}

// TestBadLimits checks that limits no handshake can produce (a negative or
// huge segment size) never make the decoders panic or accept a frame whose
// length they cannot bound.
func TestBadLimits(t *testing.T) {
	p := payload(100)
	frame := dataFrame(Data{Message: 1, Total: 100}, p)
	for _, seg := range []int64{math.MinInt64, -1 << 32, -1 << 31, -1000, -1, 0} {
		lim := Limits{SegmentSize: int(seg), MaxMessage: -1} // truncated on 32-bit platforms
		for _, n := range []uint32{DataFixedSize, DataFixedSize + 100, 1 << 31, math.MaxUint32 - 100} {
			b := append(hdr(TypeData, 0, 0, 0, n), make([]byte, 64)...)
			_, err := ParseHeader(b, lim)
			wantMalformed(t, err)
			_, _, err = DecodeFrame(b, lim)
			wantMalformed(t, err)
		}
		_, _, err := DecodeFrame(frame, lim)
		wantMalformed(t, err)
	}
	// A segment size beyond 32 bits bounds nothing less than the frame
	// length field does; the frame is judged by ParseData.
	if uint64(math.MaxInt) > math.MaxUint32 {
		for _, seg := range []int64{1 << 32, 1<<32 + 100, math.MaxInt64} {
			lim := Limits{SegmentSize: int(seg), MaxMessage: -1}
			if _, n, err := DecodeFrame(frame, lim); err != nil || n != len(frame) {
				t.Errorf("segment size %d: DecodeFrame = %d, %v", seg, n, err)
			}
		}
	}
}

var sinkHeader Header
var sinkData Data

func TestZeroAllocs(t *testing.T) {
	p := payload(testSeg)
	d := crcData(Data{Session: 9, Message: 3, Tag: 1, Total: 3 * testSeg, Offset: testSeg, Len: testSeg}, p)
	buf := make([]byte, DataHeaderSize+testSeg)
	PutData(buf, d)
	copy(buf[DataHeaderSize:], p)
	hello := AppendHello(nil, testHello)
	ack := AppendAck(nil, Ack{Received: 1, Credit: 2})

	for _, c := range []struct {
		name string
		f    func()
	}{
		{"PutData", func() { PutData(buf, d) }},
		{"ParseHeader", func() {
			h, err := ParseHeader(buf, testLim)
			if err != nil {
				panic(err)
			}
			sinkHeader = h
		}},
		{"ParseData", func() {
			d, err := ParseData(sinkHeader, buf[HeaderSize:DataHeaderSize], testLim)
			if err != nil {
				panic(err)
			}
			sinkData = d
		}},
		{"DecodeFrame/data", func() {
			if _, _, err := DecodeFrame(buf, testLim); err != nil {
				panic(err)
			}
		}},
		{"DecodeFrame/hello", func() {
			if _, _, err := DecodeFrame(hello, testLim); err != nil {
				panic(err)
			}
		}},
		{"DecodeFrame/ack", func() {
			if _, _, err := DecodeFrame(ack, testLim); err != nil {
				panic(err)
			}
		}},
		{"Checksum", func() { sinkData.CRC = Checksum(p) }},
	} {
		if a := testing.AllocsPerRun(1000, c.f); a != 0 {
			t.Errorf("%s: %v allocs per run, want 0", c.name, a)
		}
	}
}
