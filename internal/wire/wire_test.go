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

// seq returns n bytes start, start+1, ... (wrapping at 0xff).
func seq(start byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = start + byte(i)
	}
	return b
}

var (
	testHello = Hello{
		Version: Version, Flags: HelloRejoin, Rail: 2, Rails: 3,
		Session:     seq16(0x00),
		SegmentSize: 64 << 10, Window: 1 << 30, MaxMessage: 1 << 24,
	}
	testChallenge = Challenge{
		Flags:       ChallengePlaintext,
		SegmentSize: MinSegmentSize, Window: math.MaxUint64, MaxMessage: 1 << 20,
	}
	// testTag stands in for the AEAD tag that is the whole body of an
	// AUTH or WELCOME frame.
	testTag = seq(0xa0, TagSize)
)

// fakeMsg1 stands in for the first Noise message of a HELLO: an ephemeral
// key, m's parameters and a tag. The codec treats the message as opaque;
// the parameters are left in clear here (as a null cipher would leave
// them) so that a test can check the round trip of a whole Hello.
func fakeMsg1(m Hello) []byte {
	b := seq(0x40, NoiseKeySize)
	b = AppendHelloParams(b, m)
	return append(b, seq(0xe0, TagSize)...)
}

// fakeMsg2 stands in for the second Noise message (a CHALLENGE body), as
// fakeMsg1 for the first.
func fakeMsg2(m Challenge) []byte {
	b := seq(0x60, NoiseKeySize)
	b = AppendChallengeParams(b, m)
	return append(b, seq(0xd0, TagSize)...)
}

// openMsg1 and openMsg2 return the parameters fakeMsg1 and fakeMsg2 put
// in clear.
func openMsg1(msg1 []byte) []byte { return msg1[NoiseKeySize : NoiseKeySize+HelloParamsSize] }
func openMsg2(msg2 []byte) []byte { return msg2[NoiseKeySize : NoiseKeySize+ChallengeParams] }

// helloFrame is the whole HELLO frame for m, with fakeMsg1(m).
func helloFrame(m Hello) []byte { return AppendHello(nil, m, fakeMsg1(m)) }

// challengeFrame is the whole CHALLENGE frame for m, with fakeMsg2(m).
func challengeFrame(m Challenge) []byte { return AppendSealed(nil, TypeChallenge, fakeMsg2(m)) }

// helloPrefixOf is the part of m that ParseHelloPrefix decodes.
func helloPrefixOf(m Hello) Hello {
	return Hello{Version: m.Version, Flags: m.Flags, Session: m.Session}
}

// dataFrame builds a whole DATA frame for d with payload p (d.Len is set
// from p).
func dataFrame(d Data, p []byte) []byte {
	d.Len = uint32(len(p))
	b := make([]byte, DataHeaderSize+len(p))
	PutData(b, d)
	copy(b[DataHeaderSize:], p)
	return b
}

// smallFrame builds a whole SMALL frame: with a the ACK it carries when
// withAck, message id, tag and payload p.
func smallFrame(flags uint8, id uint64, tag uint32, p []byte, withAck bool, a Ack) []byte {
	h := make([]byte, SmallHeaderSize)
	PutSmall(h, flags, id, tag, len(p))
	if !withAck {
		return append(h, p...)
	}
	b := AppendSmallAck(nil, h, a)
	b = append(b, h[HeaderSize:]...)
	return append(b, p...)
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
	if !errors.Is(err, ErrVersion) || errors.Is(err, ErrMalformed) || errors.Is(err, ErrShort) {
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
		{Version: Version, Flags: HelloJoin | HelloPlaintext, Rail: math.MaxUint16 - 1, Rails: math.MaxUint16, Session: seq16(0xf0), SegmentSize: MaxSegmentSize, Window: math.MaxUint64, MaxMessage: math.MaxUint64},
		{Version: Version, Flags: HelloRejoin | HelloPlaintext, Rail: 1, Rails: 2, Session: seq16(0x80), SegmentSize: testSeg, Window: 1, MaxMessage: 1},
		{Version: Version, Flags: HelloPlaintext, Rail: 7, Rails: 8, Session: seq16(0x10), SegmentSize: 1 << 20, Window: 1 << 40, MaxMessage: 1 << 32},
	} {
		msg1 := fakeMsg1(m)
		add(fmt.Sprintf("hello/flags=%#x/rail=%d/%d", m.Flags, m.Rail, m.Rails), AppendHello(nil, m, msg1), TypeHello, func(t *testing.T, _ Header, body []byte) {
			got, rest, err := ParseHelloPrefix(body)
			if err != nil || got != helloPrefixOf(m) {
				t.Fatalf("ParseHelloPrefix = %+v, %v; want %+v", got, err, helloPrefixOf(m))
			}
			if !bytes.Equal(rest, msg1) {
				t.Fatalf("ParseHelloPrefix rest %x, want the Noise message %x", rest, msg1)
			}
			if err := ParseHelloParams(openMsg1(rest), &got); err != nil || got != m {
				t.Fatalf("ParseHelloParams = %+v, %v; want %+v", got, err, m)
			}
		})
	}
	for _, m := range []Challenge{
		testChallenge,
		{SegmentSize: MaxSegmentSize, MaxMessage: math.MaxUint64},
		{Flags: 0, SegmentSize: 64 << 10, Window: 1 << 30, MaxMessage: 1 << 24},
	} {
		msg2 := fakeMsg2(m)
		add(fmt.Sprintf("challenge/flags=%#x/seg=%d", m.Flags, m.SegmentSize), AppendSealed(nil, TypeChallenge, msg2), TypeChallenge, func(t *testing.T, _ Header, body []byte) {
			if !bytes.Equal(body, msg2) {
				t.Fatalf("challenge body %x, want the Noise message %x", body, msg2)
			}
			got, err := ParseChallengeParams(openMsg2(body))
			if err != nil || got != m {
				t.Fatalf("ParseChallengeParams = %+v, %v; want %+v", got, err, m)
			}
		})
	}
	for _, typ := range []uint8{TypeAuth, TypeWelcome} {
		for _, tag := range [][]byte{testTag, make([]byte, TagSize), bytes.Repeat([]byte{0xff}, TagSize)} {
			add(fmt.Sprintf("sealed-%#02x/%x", typ, tag[:2]), AppendSealed(nil, typ, tag), typ, func(t *testing.T, h Header, body []byte) {
				if h.Len != TagSize || !bytes.Equal(body, tag) {
					t.Fatalf("sealed body %x (length %d), want %x", body, h.Len, tag)
				}
			})
		}
	}
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
	for _, a := range []Ack{{}, {Received: 7, Credit: 1 << 40, Arrived: 123456789}, {Received: math.MaxUint64, Credit: math.MaxUint64, Arrived: math.MaxInt64}} {
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
	testAck := Ack{Received: 3, Credit: 1 << 20, Arrived: 12345}
	for _, c := range []struct {
		name    string
		flags   uint8
		p       []byte
		withAck bool
	}{
		{"small-8", 0, payload(8), false},
		{"small-empty", 0, nil, false},
		{"small-eager", FlagEager, payload(48), false},
		{"small-segment", 0, payload(testSeg), false},
		{"small-ack", FlagEager, payload(48), true},
		{"small-ack-empty", 0, nil, true},
	} {
		frame := smallFrame(c.flags, 77, 5, c.p, c.withAck, testAck)
		want := Data{Flags: c.flags, Message: 77, Tag: 5, Total: uint64(len(c.p)), Len: uint32(len(c.p))}
		add(c.name, frame, TypeSmall, func(t *testing.T, h Header, body []byte) {
			a, ok, d, p, err := ParseSmall(h, body, testLim)
			if err != nil || d != want || ok != c.withAck || (ok && a != testAck) {
				t.Fatalf("ParseSmall = %+v, %v, %+v, %v; want %+v, %v, %+v", a, ok, d, err, testAck, c.withAck, want)
			}
			if !bytes.Equal(p, c.p) {
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

// TestHelloPrefixRoundTrip: the clear part of a HELLO decodes to the
// version, flags and session it was made of, for every flag combination
// that is allowed, and leaves the other fields alone.
func TestHelloPrefixRoundTrip(t *testing.T) {
	for _, flags := range []uint8{0, HelloRejoin, HelloJoin, HelloPlaintext, HelloRejoin | HelloPlaintext, HelloJoin | HelloPlaintext} {
		for _, session := range [][16]byte{{}, seq16(0x00), seq16(0xf8)} {
			m := testHello
			m.Flags = flags
			m.Session = session
			prefix := AppendHelloPrefix(nil, m)
			if len(prefix) != HelloPrefixSize {
				t.Fatalf("AppendHelloPrefix gives %d bytes, want %d", len(prefix), HelloPrefixSize)
			}
			rest := seq(0x33, HelloSize-HelloPrefixSize)
			body := append(prefix, rest...)
			got, gotRest, err := ParseHelloPrefix(body)
			if err != nil || got != helloPrefixOf(m) {
				t.Fatalf("ParseHelloPrefix(%x) = %+v, %v; want %+v", body, got, err, helloPrefixOf(m))
			}
			if !bytes.Equal(gotRest, rest) {
				t.Fatalf("ParseHelloPrefix rest %x, want %x", gotRest, rest)
			}
			// The prefix and the Noise message make the whole frame.
			frame := AppendHello(nil, m, rest)
			if !bytes.Equal(frame[HeaderSize:], body) {
				t.Fatalf("AppendHello body %x, want %x", frame[HeaderSize:], body)
			}
		}
	}
}

// TestHelloParamsRoundTrip: the sealed part of a HELLO decodes to the
// rail parameters it was made of, and ParseHelloParams leaves the fields
// of the clear prefix alone.
func TestHelloParamsRoundTrip(t *testing.T) {
	for _, p := range []Hello{
		testHello,
		{Rail: 0, Rails: 1, SegmentSize: MinSegmentSize},
		{Rail: math.MaxUint16 - 1, Rails: math.MaxUint16, SegmentSize: MaxSegmentSize, Window: math.MaxUint64, MaxMessage: math.MaxUint64},
		{Rail: 0x0102, Rails: 0x0304, SegmentSize: 0x00050607, Window: 0x08090a0b0c0d0e0f, MaxMessage: 0x1011121314151617},
	} {
		b := AppendHelloParams(nil, p)
		if len(b) != HelloParamsSize {
			t.Fatalf("AppendHelloParams gives %d bytes, want %d", len(b), HelloParamsSize)
		}
		m := Hello{Version: 0xee, Flags: 0xdd, Session: seq16(0x77)}
		want := p
		want.Version, want.Flags, want.Session = m.Version, m.Flags, m.Session
		if err := ParseHelloParams(b, &m); err != nil || m != want {
			t.Fatalf("ParseHelloParams(%x) = %+v, %v; want %+v", b, m, err, want)
		}
		// The clear fields of the Hello are not encoded.
		if again := AppendHelloParams(nil, m); !bytes.Equal(again, b) {
			t.Fatalf("AppendHelloParams depends on the prefix fields: %x, want %x", again, b)
		}
	}
}

func TestChallengeParamsRoundTrip(t *testing.T) {
	for _, m := range []Challenge{
		testChallenge,
		{SegmentSize: MinSegmentSize},
		{Flags: ChallengePlaintext, SegmentSize: MaxSegmentSize, Window: math.MaxUint64, MaxMessage: math.MaxUint64},
		{SegmentSize: 0x00010203, Window: 0x0102030405060708, MaxMessage: 0x1112131415161718},
	} {
		b := AppendChallengeParams(nil, m)
		if len(b) != ChallengeParams {
			t.Fatalf("AppendChallengeParams gives %d bytes, want %d", len(b), ChallengeParams)
		}
		got, err := ParseChallengeParams(b)
		if err != nil || got != m {
			t.Fatalf("ParseChallengeParams(%x) = %+v, %v; want %+v", b, got, err, m)
		}
	}
}

// TestHandshakeFrameLengths: AppendHello and AppendSealed write whatever
// message they are given; a message of the wrong length makes a frame that
// the decoders refuse.
func TestHandshakeFrameLengths(t *testing.T) {
	msg1 := fakeMsg1(testHello)
	msg2 := fakeMsg2(testChallenge)
	for _, c := range []struct {
		name  string
		frame []byte
	}{
		{"hello-no-message", AppendHello(nil, testHello, nil)},
		{"hello-short-message", AppendHello(nil, testHello, msg1[:len(msg1)-1])},
		{"hello-long-message", AppendHello(nil, testHello, append(append([]byte{}, msg1...), 0))},
		{"challenge-short", AppendSealed(nil, TypeChallenge, msg2[:len(msg2)-1])},
		{"challenge-long", AppendSealed(nil, TypeChallenge, append(append([]byte{}, msg2...), 0))},
		{"challenge-empty", AppendSealed(nil, TypeChallenge, nil)},
		{"auth-empty", AppendSealed(nil, TypeAuth, nil)},
		{"auth-short", AppendSealed(nil, TypeAuth, testTag[:TagSize-1])},
		{"auth-long", AppendSealed(nil, TypeAuth, append(append([]byte{}, testTag...), 0))},
		{"welcome-empty", AppendSealed(nil, TypeWelcome, nil)},
		{"welcome-short", AppendSealed(nil, TypeWelcome, testTag[:TagSize-1])},
		{"welcome-long", AppendSealed(nil, TypeWelcome, append(append([]byte{}, testTag...), 0))},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := len(c.frame) - HeaderSize; int(c.frame[7]) != got || c.frame[4] != 0 || c.frame[5] != 0 || c.frame[6] != 0 {
				t.Fatalf("header %x for a body of %d bytes", c.frame[:HeaderSize], got)
			}
			_, n, err := DecodeFrame(c.frame, testLim)
			if n != 0 {
				t.Fatalf("DecodeFrame consumed %d bytes", n)
			}
			wantMalformed(t, err)
		})
	}
}

// TestSealedBodiesAreOpaque: DecodeFrame checks only the length of a
// CHALLENGE, AUTH or WELCOME body (its content is the Noise layer's).
func TestSealedBodiesAreOpaque(t *testing.T) {
	for _, c := range []struct {
		typ  uint8
		size int
	}{{TypeChallenge, ChallengeSize}, {TypeAuth, AuthSize}, {TypeWelcome, WelcomeSize}} {
		for _, body := range [][]byte{make([]byte, c.size), bytes.Repeat([]byte{0xff}, c.size), seq(0x80, c.size)} {
			frame := AppendSealed(nil, c.typ, body)
			h, n, err := DecodeFrame(frame, Limits{})
			if err != nil || n != len(frame) || h != (Header{Type: c.typ, Len: uint32(c.size)}) {
				t.Errorf("type %#x, body %x: DecodeFrame = %+v, %d, %v", c.typ, body, h, n, err)
			}
		}
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
	msg1 := fakeMsg1(testHello)
	msg2 := fakeMsg2(testChallenge)
	for name, f := range map[string]func([]byte) []byte{
		"hello":            func(b []byte) []byte { return AppendHello(b, testHello, msg1) },
		"hello-prefix":     func(b []byte) []byte { return AppendHelloPrefix(b, testHello) },
		"hello-params":     func(b []byte) []byte { return AppendHelloParams(b, testHello) },
		"challenge-params": func(b []byte) []byte { return AppendChallengeParams(b, testChallenge) },
		"challenge":        func(b []byte) []byte { return AppendSealed(b, TypeChallenge, msg2) },
		"auth":             func(b []byte) []byte { return AppendSealed(b, TypeAuth, testTag) },
		"welcome":          func(b []byte) []byte { return AppendSealed(b, TypeWelcome, testTag) },
		"reject":           func(b []byte) []byte { return AppendReject(b, Reject{Code: 1, Reason: "r"}) },
		"ack":              func(b []byte) []byte { return AppendAck(b, Ack{Received: 1, Credit: 2}) },
		"goaway":           func(b []byte) []byte { return AppendGoAway(b, 1) },
		"ping":             AppendPing,
	} {
		want := append(append([]byte{}, prefix...), f(nil)...)
		got := f(append([]byte{}, prefix...))
		if !bytes.Equal(got, want) {
			t.Errorf("%s: appending to a prefix gives %x, want %x", name, got, want)
		}
		// Appending within the spare capacity of b writes after len(b)
		// only.
		spare := make([]byte, len(prefix), len(prefix)+len(want)+16)
		copy(spare, prefix)
		full := spare[:cap(spare)]
		for i := len(prefix); i < len(full); i++ {
			full[i] = 0x5a
		}
		got = f(spare)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: appending within capacity gives %x, want %x", name, got, want)
		}
		for i := len(want); i < len(full); i++ {
			if full[i] != 0x5a {
				t.Errorf("%s: byte %d beyond the appended frame changed", name, i)
				break
			}
		}
	}
	// The messages given to AppendHello and AppendSealed are copied, not
	// changed.
	if !bytes.Equal(msg1, fakeMsg1(testHello)) || !bytes.Equal(msg2, fakeMsg2(testChallenge)) || !bytes.Equal(testTag, seq(0xa0, TagSize)) {
		t.Error("an Append function changed the message it was given")
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

// TestGolden pins the byte layout that docs/wire.md specifies. Frames are
// checked by DecodeFrame too; the sealed parameters (which travel inside a
// Noise message) are checked by their parsers.
func TestGolden(t *testing.T) {
	joinHello := Hello{
		Version: Version, Flags: HelloJoin | HelloPlaintext, Rail: 0, Rails: 1,
		Session: seq16(0xf0), SegmentSize: MinSegmentSize, Window: 0, MaxMessage: math.MaxUint64,
	}
	oddHello := Hello{Rail: 0x0102, Rails: 0x0304, SegmentSize: 0x00050607, Window: 0x08090a0b0c0d0e0f, MaxMessage: 0x1011121314151617}
	oddChallenge := Challenge{SegmentSize: 0x00010203, Window: 0x0102030405060708, MaxMessage: 0x1112131415161718}
	const (
		key1 = "404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f" // fakeMsg1's ephemeral key
		tag1 = "e0e1e2e3e4e5e6e7e8e9eaebecedeeef"                                 // fakeMsg1's tag
		key2 = "606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f" // fakeMsg2's ephemeral key
		tag2 = "d0d1d2d3d4d5d6d7d8d9dadbdcdddedf"                                 // fakeMsg2's tag
		tag  = "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf"                                 // testTag
	)
	for _, c := range []struct {
		name  string
		b     []byte
		frame bool // a whole frame, to be accepted by DecodeFrame
		hex   string
	}{
		// HELLO, rail 2 of 3, rejoin, session 00..0f, segment 65536,
		// window 2^30, max message 2^24: magic "MRLY", version 6, flags
		// 0x01, two zero bytes, session; then the Noise message: key,
		// parameters (rail 2, rails 3, four zero bytes, segment 0x10000,
		// window 0x40000000, max message 0x1000000), tag.
		{"hello", helloFrame(testHello), true,
			"01000000" + "00000064" +
				"4d524c59" + "06" + "01" + "0000" + "000102030405060708090a0b0c0d0e0f" +
				key1 +
				"0002" + "0003" + "00000000" + "00010000" + "0000000040000000" + "0000000001000000" +
				tag1},
		{"hello-prefix", AppendHelloPrefix(nil, testHello), false,
			"4d524c59" + "06" + "01" + "0000" + "000102030405060708090a0b0c0d0e0f"},
		{"hello-params", AppendHelloParams(nil, testHello), false,
			"0002" + "0003" + "00000000" + "00010000" + "0000000040000000" + "0000000001000000"},
		// Join and plaintext, rail 0 of 1, session f0..ff, segment 512,
		// window 0, max message 2^64-1.
		{"hello-join", helloFrame(joinHello), true,
			"01000000" + "00000064" +
				"4d524c59" + "06" + "06" + "0000" + "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff" +
				key1 +
				"0000" + "0001" + "00000000" + "00000200" + "0000000000000000" + "ffffffffffffffff" +
				tag1},
		// Every field its own bytes: a swapped or misplaced field shows.
		{"hello-params-odd", AppendHelloParams(nil, oddHello), false,
			"0102" + "0304" + "00000000" + "00050607" + "08090a0b0c0d0e0f" + "1011121314151617"},
		// CHALLENGE: the Noise message, whose payload is the parameters:
		// flags 0x01 (plaintext), three zero bytes, segment 512, window
		// 2^64-1, max message 2^20.
		{"challenge", challengeFrame(testChallenge), true,
			"02000000" + "00000048" +
				key2 +
				"01" + "000000" + "00000200" + "ffffffffffffffff" + "0000000000100000" +
				tag2},
		{"challenge-params", AppendChallengeParams(nil, testChallenge), false,
			"01" + "000000" + "00000200" + "ffffffffffffffff" + "0000000000100000"},
		{"challenge-params-odd", AppendChallengeParams(nil, oddChallenge), false,
			"00" + "000000" + "00010203" + "0102030405060708" + "1112131415161718"},
		{"auth", AppendSealed(nil, TypeAuth, testTag), true, "03000000" + "00000010" + tag},
		{"welcome", AppendSealed(nil, TypeWelcome, testTag), true, "04000000" + "00000010" + tag},
		{"reject", AppendReject(nil, Reject{Code: RejectAuth, Reason: "no"}), true, "05000000" + "00000004" + "0002" + "6e6f"},
		{"data", dataFrame(crcData(Data{Session: 0x0102030405060708, Message: 9, Tag: 7, Total: 3, Offset: 0}, []byte("abc")), []byte("abc")), true,
			"10010000" + "0000002b" + "0102030405060708" + "0000000000000009" + "00000007" + "364b3fb7" +
				"0000000000000003" + "0000000000000000" + "616263"},
		{"ack", AppendAck(nil, Ack{Received: 5, Credit: 0x10000, Arrived: 1500000}), true,
			"11000000" + "00000018" + "0000000000000005" + "0000000000010000" + "000000000016e360"},
		// SMALL: message 9, tag 7, "abc"; then eager with an ACK
		// (received 5, credit 0x10000, arrived 1500000) in front.
		{"small", smallFrame(0, 9, 7, []byte("abc"), false, Ack{}), true,
			"14000000" + "0000000f" + "0000000000000009" + "00000007" + "616263"},
		{"small-ack", smallFrame(FlagEager, 9, 7, []byte("abc"), true, Ack{Received: 5, Credit: 0x10000, Arrived: 1500000}), true,
			"14060000" + "00000027" + "0000000000000005" + "0000000000010000" + "000000000016e360" +
				"0000000000000009" + "00000007" + "616263"},
		{"goaway", AppendGoAway(nil, GoAwayProtocol), true, "12000000" + "00000002" + "0001"},
		{"ping", AppendPing(nil), true, "13000000" + "00000000"},
	} {
		if got := hex.EncodeToString(c.b); got != c.hex {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.hex)
		}
		if c.frame {
			if _, n, err := DecodeFrame(c.b, testLim); err != nil || n != len(c.b) {
				t.Errorf("%s: DecodeFrame = %d, %v", c.name, n, err)
			}
		}
	}

	// The golden bytes decode to the values they were made of.
	body, _ := hex.DecodeString("4d524c59" + "06" + "06" + "0000" + "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff" + key1 +
		"0000" + "0001" + "00000000" + "00000200" + "0000000000000000" + "ffffffffffffffff" + tag1)
	m, rest, err := ParseHelloPrefix(body)
	if err != nil || m != helloPrefixOf(joinHello) || len(rest) != HelloSize-HelloPrefixSize {
		t.Fatalf("ParseHelloPrefix(golden) = %+v, %d bytes, %v", m, len(rest), err)
	}
	if err := ParseHelloParams(openMsg1(rest), &m); err != nil || m != joinHello {
		t.Errorf("ParseHelloParams(golden) = %+v, %v; want %+v", m, err, joinHello)
	}
	p, _ := hex.DecodeString("0102" + "0304" + "00000000" + "00050607" + "08090a0b0c0d0e0f" + "1011121314151617")
	var odd Hello
	if err := ParseHelloParams(p, &odd); err != nil || odd != oddHello {
		t.Errorf("ParseHelloParams(golden) = %+v, %v; want %+v", odd, err, oddHello)
	}
	p, _ = hex.DecodeString("00" + "000000" + "00010203" + "0102030405060708" + "1112131415161718")
	if ch, err := ParseChallengeParams(p); err != nil || ch != oddChallenge {
		t.Errorf("ParseChallengeParams(golden) = %+v, %v; want %+v", ch, err, oddChallenge)
	}
}

// TestOlderPeer: the frames a version 3 peer sends. Its HELLO (64 bytes,
// a version 3 HELLO as version 3 laid it out) is refused with ErrVersion and
// its version, not as a malformed frame; its 40-byte AUTH and empty
// WELCOME are malformed.
func TestOlderPeer(t *testing.T) {
	v3, _ := hex.DecodeString("01000000" + "00000040" + "4d524c59" + "0301" + "0002" + "0003" + "0000" +
		"000102030405060708090a0b0c0d0e0f" + "101112131415161718191a1b1c1d1e1f" +
		"00010000" + "0000000040000000" + "0000000001000000")
	h, err := ParseHeader(v3, Limits{})
	if err != nil || h != (Header{Type: TypeHello, Len: 64}) {
		t.Fatalf("ParseHeader(version 3 hello) = %+v, %v", h, err)
	}
	_, n, err := DecodeFrame(v3, Limits{})
	if n != 0 {
		t.Fatalf("DecodeFrame consumed %d bytes", n)
	}
	wantVersion(t, err)
	m, rest, err := ParseHelloPrefix(v3[HeaderSize:])
	wantVersion(t, err)
	if m.Version != 3 || rest != nil {
		t.Fatalf("ParseHelloPrefix(version 3 hello) = %+v, %x; want Version 3 and no rest", m, rest)
	}
	// Until the whole version 3 hello is there, it is short.
	for i := range len(v3) {
		if _, n, err := DecodeFrame(v3[:i], Limits{}); err != ErrShort || n != 0 {
			t.Fatalf("DecodeFrame of %d of %d bytes = %d, %v; want 0, ErrShort", i, len(v3), n, err)
		}
	}

	for _, s := range []string{
		// AUTH: proof 80..9f, window 2^30.
		"03000000" + "00000028" + "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f" + "0000000040000000",
		// WELCOME, empty.
		"04000000" + "00000000",
	} {
		b, _ := hex.DecodeString(s)
		_, err := ParseHeader(b, Limits{})
		wantMalformed(t, err)
		_, n, err := DecodeFrame(b, Limits{})
		if n != 0 {
			t.Fatalf("DecodeFrame consumed %d bytes", n)
		}
		wantMalformed(t, err)
	}
}

func TestSizes(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"Version", Version, 6},
		{"HeaderSize", HeaderSize, 8},
		{"NoiseKeySize", NoiseKeySize, 32},
		{"TagSize", TagSize, 16},
		{"HelloPrefixSize", HelloPrefixSize, 24},
		{"HelloParamsSize", HelloParamsSize, 28},
		{"ChallengeParams", ChallengeParams, 24},
		{"HelloSize", HelloSize, 100},
		{"ChallengeSize", ChallengeSize, 72},
		{"AuthSize", AuthSize, 16},
		{"WelcomeSize", WelcomeSize, 16},
		{"DataFixedSize", DataFixedSize, 40},
		{"DataHeaderSize", DataHeaderSize, 48},
		{"AckSize", AckSize, 24},
		{"GoAwaySize", GoAwaySize, 2},
		{"MaxControlBody", MaxControlBody, 258},
		{"len(hello prefix)", len(AppendHelloPrefix(nil, testHello)), HelloPrefixSize},
		{"len(hello params)", len(AppendHelloParams(nil, testHello)), HelloParamsSize},
		{"len(challenge params)", len(AppendChallengeParams(nil, testChallenge)), ChallengeParams},
		{"len(hello frame)", len(helloFrame(testHello)), HeaderSize + HelloSize},
		{"len(challenge frame)", len(challengeFrame(testChallenge)), HeaderSize + ChallengeSize},
		{"len(auth frame)", len(AppendSealed(nil, TypeAuth, testTag)), HeaderSize + AuthSize},
		{"len(welcome frame)", len(AppendSealed(nil, TypeWelcome, testTag)), HeaderSize + WelcomeSize},
		{"len(ack frame)", len(AppendAck(nil, Ack{})), HeaderSize + AckSize},
		{"len(goaway frame)", len(AppendGoAway(nil, 0)), HeaderSize + GoAwaySize},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	// Every handshake body fits the bound ParseHeader puts on a HELLO and
	// on control frames.
	for _, n := range []int{HelloSize, ChallengeSize, AuthSize, WelcomeSize} {
		if n > MaxControlBody {
			t.Errorf("body of %d bytes exceeds MaxControlBody %d", n, MaxControlBody)
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
	type tc struct {
		name string
		b    []byte
		lim  Limits
	}
	cases := []tc{
		{"challenge", hdr(TypeChallenge, 0, 0, 0, ChallengeSize), Limits{}},
		{"auth", hdr(TypeAuth, 0, 0, 0, AuthSize), Limits{}},
		{"welcome", hdr(TypeWelcome, 0, 0, 0, WelcomeSize), Limits{}},
		{"reject-min", hdr(TypeReject, 0, 0, 0, 2), Limits{}},
		{"reject-max", hdr(TypeReject, 0, 0, 0, MaxControlBody), Limits{}},
		{"ack", hdr(TypeAck, 0, 0, 0, AckSize), Limits{}},
		{"goaway", hdr(TypeGoAway, 0, 0, 0, GoAwaySize), Limits{}},
		{"ping", hdr(TypePing, 0, 0, 0, 0), Limits{}},
		{"data-empty", hdr(TypeData, 0, 0, 0, DataFixedSize), testLim},
		{"data-full", hdr(TypeData, 0, 0, 0, DataFixedSize+testSeg), testLim},
		{"data-crc", hdr(TypeData, FlagCRC, 0, 0, DataFixedSize+1), testLim},
		{"data-max-segment", hdr(TypeData, 0, 0, 0, DataFixedSize+MaxSegmentSize), Limits{SegmentSize: MaxSegmentSize}},
		{"small-empty", hdr(TypeSmall, 0, 0, 0, SmallFixedSize), testLim},
		{"small-segment", hdr(TypeSmall, FlagEager, 0, 0, SmallFixedSize+testSeg), testLim},
		{"small-ack", hdr(TypeSmall, FlagAck, 0, 0, AckSize+SmallFixedSize), testLim},
		{"small-max", hdr(TypeSmall, FlagAck|FlagEager, 0, 0, AckSize+SmallFixedSize+MaxSmallPayload), Limits{SegmentSize: 1 << 20}},
		{"longer-buffer", append(hdr(TypePing, 0, 0, 0, 0), 0xff, 0xff), Limits{}},
	}
	// A HELLO of any length up to MaxControlBody: its body tells the
	// version (ParseHelloPrefix), whatever its length.
	for _, n := range []uint32{0, 1, 4, 5, HelloPrefixSize, 64, HelloSize - 1, HelloSize, HelloSize + 1, MaxControlBody - 1, MaxControlBody} {
		cases = append(cases, tc{fmt.Sprintf("hello-len-%d", n), hdr(TypeHello, 0, 0, 0, n), Limits{}})
	}
	for _, c := range cases {
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
		{"short-hello", hdr(TypeHello, 0, 0, 0, HelloSize)[:HeaderSize-1], testLim},
		{"reserved-2", hdr(TypePing, 0, 1, 0, 0), testLim},
		{"reserved-3", hdr(TypePing, 0, 0, 0x80, 0), testLim},
		{"reserved-hello", hdr(TypeHello, 0, 0, 1, HelloSize), testLim},
		{"reserved-data", hdr(TypeData, 0, 0, 1, DataFixedSize), testLim},
		{"data-flag-4", hdr(TypeData, 0x04, 0, 0, DataFixedSize), testLim},
		{"data-flag-80", hdr(TypeData, 0x80|FlagCRC, 0, 0, DataFixedSize), testLim},
		{"data-len-0", hdr(TypeData, 0, 0, 0, 0), testLim},
		{"data-len-39", hdr(TypeData, 0, 0, 0, DataFixedSize-1), testLim},
		{"data-len-span+1", hdr(TypeData, 0, 0, 0, DataFixedSize+uint32(MaxPayload(testSeg))+1), testLim},
		{"data-len-max", hdr(TypeData, 0, 0, 0, math.MaxUint32), testLim},
		{"data-no-limits", hdr(TypeData, 0, 0, 0, DataFixedSize), Limits{}},
		{"data-negative-segment", hdr(TypeData, 0, 0, 0, 1<<31), Limits{SegmentSize: -1000, MaxMessage: -1}},
		{"small-crc", hdr(TypeSmall, FlagCRC, 0, 0, SmallFixedSize), testLim},
		{"small-flag-80", hdr(TypeSmall, 0x80, 0, 0, SmallFixedSize), testLim},
		{"small-reserved", hdr(TypeSmall, 0, 1, 0, SmallFixedSize), testLim},
		{"small-len-11", hdr(TypeSmall, 0, 0, 0, SmallFixedSize-1), testLim},
		{"small-ack-len-35", hdr(TypeSmall, FlagAck, 0, 0, AckSize+SmallFixedSize-1), testLim},
		{"small-over-segment", hdr(TypeSmall, 0, 0, 0, SmallFixedSize+testSeg+1), testLim},
		{"small-ack-over-segment", hdr(TypeSmall, FlagAck, 0, 0, AckSize+SmallFixedSize+testSeg+1), testLim},
		{"small-over-max", hdr(TypeSmall, 0, 0, 0, SmallFixedSize+MaxSmallPayload+1), Limits{SegmentSize: 1 << 20}},
		{"small-len-max", hdr(TypeSmall, 0, 0, 0, math.MaxUint32), testLim},
		{"small-no-limits", hdr(TypeSmall, 0, 0, 0, SmallFixedSize), Limits{}},
		{"reject-len-0", hdr(TypeReject, 0, 0, 0, 0), testLim},
		{"reject-len-1", hdr(TypeReject, 0, 0, 0, 1), testLim},
		{"reject-len-259", hdr(TypeReject, 0, 0, 0, MaxControlBody+1), testLim},
		{"reject-len-max", hdr(TypeReject, 0, 0, 0, math.MaxUint32), testLim},
	}
	// A HELLO longer than any control frame.
	for _, n := range []uint32{MaxControlBody + 1, MaxControlBody + HelloSize, 1 << 16, 1 << 31, math.MaxUint32} {
		cases = append(cases, tc{fmt.Sprintf("hello-len-%d", n), hdr(TypeHello, 0, 0, 0, n), testLim})
	}
	for _, typ := range []uint8{0x00, 0x06, 0x0f, 0x15, TypeFeedback, 0x21, 0xff} {
		cases = append(cases, tc{fmt.Sprintf("type-%#02x", typ), hdr(typ, 0, 0, 0, 0), testLim})
	}
	fixed := map[uint8]uint32{
		TypeChallenge: ChallengeSize, TypeAuth: AuthSize, TypeWelcome: WelcomeSize,
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
	// The handshake frames of version 3: a 40-byte AUTH, an empty WELCOME.
	cases = append(cases,
		tc{"auth-v3-len-40", hdr(TypeAuth, 0, 0, 0, 40), testLim},
		tc{"welcome-v3-len-0", hdr(TypeWelcome, 0, 0, 0, 0), testLim})
	for _, typ := range []uint8{TypeHello, TypeChallenge, TypeAuth, TypeWelcome, TypeReject, TypeAck, TypeGoAway, TypePing} {
		n := fixed[typ]
		switch typ {
		case TypeReject:
			n = 2
		case TypeHello:
			n = HelloSize
		}
		for _, fl := range []uint8{FlagCRC, FlagEager, 0x80} {
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

// checkBodies runs parse on each case's body. With typ != 0 it also
// decodes the body as a frame of type typ, which must fail the same way
// when ParseHeader accepts its length; typ 0 is for the sealed parts of
// the handshake, which no frame carries in clear.
func checkBodies(t *testing.T, typ uint8, parse func([]byte) error, cases []bodyCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			check := wantMalformed
			if c.version {
				check = wantVersion
			}
			check(t, parse(c.body))
			if typ == 0 {
				return
			}
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

func TestParseHelloPrefixRejects(t *testing.T) {
	good := helloFrame(testHello)[HeaderSize:]
	if _, _, err := ParseHelloPrefix(good); err != nil {
		t.Fatal(err)
	}
	m := func(f func(b []byte)) []byte { return mutate(good, f) }
	// withLen is good cut or padded (with 0xaa) to n bytes.
	withLen := func(n int) []byte {
		b := append([]byte{}, good[:min(n, len(good))]...)
		for len(b) < n {
			b = append(b, 0xaa)
		}
		return b
	}
	version := func(v uint8, n int) []byte { b := withLen(n); b[4] = v; return b }
	cases := []bodyCase{
		{"empty", nil, false},
		{"M", []byte("M"), false},
		{"MRL", []byte("MRL"), false},
		{"magic-only", []byte("MRLY"), false},
		{"magic-and-version-only", withLen(5), false},
		{"prefix-only", withLen(HelloPrefixSize), false},
		{"short", withLen(HelloSize - 1), false},
		{"long", withLen(HelloSize + 1), false},
		{"max-control-body", withLen(MaxControlBody), false},
		{"huge", withLen(1 << 12), false},
		{"version-0", m(func(b []byte) { b[4] = 0 }), true},
		{"version-1", m(func(b []byte) { b[4] = 1 }), true},
		{"version-2", m(func(b []byte) { b[4] = 2 }), true},
		{"version-3", m(func(b []byte) { b[4] = 3 }), true},
		{"version-4", m(func(b []byte) { b[4] = 4 }), true},
		{"version-5", m(func(b []byte) { b[4] = 5 }), true},
		{"version-7", m(func(b []byte) { b[4] = 7 }), true},
		{"version-255", m(func(b []byte) { b[4] = 255 }), true},
		// Another version decides, whatever the length: version 3 hellos
		// had 64 bytes, a later version may have any.
		{"version-3-len-5", version(3, 5), true},
		{"version-3-len-64", version(3, 64), true},
		{"version-7-len-max-control-body", version(7, MaxControlBody), true},
		{"version-7-huge", version(7, 1<<12), true},
		// A later version may use the flags and reserved bytes.
		{"version-7-flags-reserved", m(func(b []byte) { b[4] = 7; b[5] = 0xff; b[6] = 1; b[7] = 1 }), true},
		{"version-7-join-rejoin", m(func(b []byte) { b[4] = 7; b[5] = HelloJoin | HelloRejoin }), true},
		// But without the magic it is not a multirail peer at all.
		{"magic-and-version", m(func(b []byte) { b[0] = 'X'; b[4] = 3 }), false},
		{"magic-and-version-short", []byte("MRLx\x03"), false},
		{"http", append([]byte("GET / HTTP/1.1\r\n"), good[16:]...), false},
		{"flags-08", m(func(b []byte) { b[5] = 0x08 }), false},
		{"flags-10", m(func(b []byte) { b[5] = 0x10 }), false},
		{"flags-80", m(func(b []byte) { b[5] = 0x80 }), false},
		{"flags-ff", m(func(b []byte) { b[5] = 0xff }), false},
		{"flags-plaintext-and-unknown", m(func(b []byte) { b[5] = HelloPlaintext | 0x40 }), false},
		{"flags-join-rejoin", m(func(b []byte) { b[5] = HelloJoin | HelloRejoin }), false},
		{"flags-join-rejoin-plaintext", m(func(b []byte) { b[5] = HelloJoin | HelloRejoin | HelloPlaintext }), false},
		{"reserved-6", m(func(b []byte) { b[6] = 1 }), false},
		{"reserved-7", m(func(b []byte) { b[7] = 0x80 }), false},
	}
	for i := range 4 {
		cases = append(cases, bodyCase{fmt.Sprintf("magic-%d", i), m(func(b []byte) { b[i] ^= 0x20 }), false})
	}
	checkBodies(t, TypeHello, func(b []byte) error { _, _, err := ParseHelloPrefix(b); return err }, cases)

	// The version error carries the peer's version, with any length.
	for _, n := range []int{5, 64, HelloSize, MaxControlBody} {
		got, rest, err := ParseHelloPrefix(version(7, n))
		if !errors.Is(err, ErrVersion) || got.Version != 7 || rest != nil {
			t.Errorf("ParseHelloPrefix of version 7, %d bytes = %+v, %x, %v; want Version 7 and ErrVersion", n, got, rest, err)
		}
	}
	// Every allowed flag combination and any session is accepted; the
	// Noise message is not looked at.
	for _, fl := range []uint8{0, HelloRejoin, HelloJoin, HelloPlaintext, HelloRejoin | HelloPlaintext, HelloJoin | HelloPlaintext} {
		for _, b := range [][]byte{
			m(func(b []byte) { b[5] = fl }),
			m(func(b []byte) { b[5] = fl; copy(b[8:24], bytes.Repeat([]byte{0xff}, 16)) }),
			m(func(b []byte) { b[5] = fl; copy(b[HelloPrefixSize:], make([]byte, HelloSize-HelloPrefixSize)) }),
		} {
			got, rest, err := ParseHelloPrefix(b)
			if err != nil || got.Flags != fl || got.Version != Version || [16]byte(b[8:24]) != got.Session || !bytes.Equal(rest, b[HelloPrefixSize:]) {
				t.Errorf("ParseHelloPrefix(%x) = %+v, %x, %v", b, got, rest, err)
			}
			if _, n, err := DecodeFrame(append(hdr(TypeHello, 0, 0, 0, HelloSize), b...), testLim); err != nil || n != HeaderSize+HelloSize {
				t.Errorf("DecodeFrame of hello %x = %d, %v", b, n, err)
			}
		}
	}
}

func TestParseHelloParamsRejects(t *testing.T) {
	good := AppendHelloParams(nil, testHello)
	var tmp Hello
	if err := ParseHelloParams(good, &tmp); err != nil {
		t.Fatal(err)
	}
	m := func(f func(b []byte)) []byte { return mutate(good, f) }
	rails := func(rail, n uint16) []byte {
		return m(func(b []byte) { put16(b, 0, rail); put16(b, 2, n) })
	}
	seg := func(s uint32) []byte { return m(func(b []byte) { put32(b, 8, s) }) }
	cases := []bodyCase{
		{"empty", nil, false},
		{"short", good[:HelloParamsSize-1], false},
		{"long", append(append([]byte{}, good...), 0), false},
		{"whole-hello", helloFrame(testHello)[HeaderSize:], false},
		{"reserved-4", m(func(b []byte) { b[4] = 1 }), false},
		{"reserved-5", m(func(b []byte) { b[5] = 1 }), false},
		{"reserved-6", m(func(b []byte) { b[6] = 1 }), false},
		{"reserved-7", m(func(b []byte) { b[7] = 0x80 }), false},
		{"rails-0", rails(0, 0), false},
		{"rail-eq-rails", rails(3, 3), false},
		{"rail-gt-rails", rails(4, 3), false},
		{"rail-max", rails(math.MaxUint16, math.MaxUint16), false},
		{"rail-1-of-0", rails(1, 0), false},
		{"rail-max-of-1", rails(math.MaxUint16, 1), false},
		{"segment-0", seg(0), false},
		{"segment-min-1", seg(MinSegmentSize - 1), false},
		{"segment-max+1", seg(MaxSegmentSize + 1), false},
		{"segment-uint32-max", seg(math.MaxUint32), false},
	}
	checkBodies(t, 0, func(b []byte) error { var h Hello; return ParseHelloParams(b, &h) }, cases)

	// Edges that are allowed; window and max message take any value.
	for _, b := range [][]byte{
		rails(0, 1), rails(math.MaxUint16-1, math.MaxUint16), seg(MinSegmentSize), seg(MaxSegmentSize),
		m(func(b []byte) { copy(b[12:28], make([]byte, 16)) }),
		m(func(b []byte) { copy(b[12:28], bytes.Repeat([]byte{0xff}, 16)) }),
	} {
		var h Hello
		if err := ParseHelloParams(b, &h); err != nil {
			t.Errorf("ParseHelloParams(%x): %v", b, err)
		}
	}
}

func TestParseChallengeParamsRejects(t *testing.T) {
	good := AppendChallengeParams(nil, testChallenge)
	if _, err := ParseChallengeParams(good); err != nil {
		t.Fatal(err)
	}
	m := func(f func(b []byte)) []byte { return mutate(good, f) }
	seg := func(s uint32) []byte { return m(func(b []byte) { put32(b, 4, s) }) }
	cases := []bodyCase{
		{"empty", nil, false},
		{"short", good[:ChallengeParams-1], false},
		{"long", append(append([]byte{}, good...), 0), false},
		{"whole-challenge", challengeFrame(testChallenge)[HeaderSize:], false},
		{"reserved-1", m(func(b []byte) { b[1] = 1 }), false},
		{"reserved-2", m(func(b []byte) { b[2] = 1 }), false},
		{"reserved-3", m(func(b []byte) { b[3] = 0x80 }), false},
		{"segment-0", seg(0), false},
		{"segment-min-1", seg(MinSegmentSize - 1), false},
		{"segment-max+1", seg(MaxSegmentSize + 1), false},
		{"segment-uint32-max", seg(math.MaxUint32), false},
	}
	// Unknown flags; 0x03 and 0x04 are where a version 3 CHALLENGE had its
	// version.
	for _, fl := range []uint8{0x02, 0x03, 0x04, 0x10, 0x80, 0xfe, 0xff} {
		cases = append(cases, bodyCase{fmt.Sprintf("flags-%#02x", fl), m(func(b []byte) { b[0] = fl }), false})
	}
	checkBodies(t, 0, func(b []byte) error { _, err := ParseChallengeParams(b); return err }, cases)

	for _, b := range [][]byte{
		seg(MinSegmentSize), seg(MaxSegmentSize),
		m(func(b []byte) { b[0] = 0 }), m(func(b []byte) { b[0] = ChallengePlaintext }),
		m(func(b []byte) { copy(b[8:24], make([]byte, 16)) }),
	} {
		if _, err := ParseChallengeParams(b); err != nil {
			t.Errorf("ParseChallengeParams(%x): %v", b, err)
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
	t.Run("ack", func(t *testing.T) {
		// An arrival time with the top bit set (beyond 2^63-1), and a
		// version 4 ACK (16 bytes: no arrival time).
		late := make([]byte, AckSize)
		late[16] = 0x80
		checkBodies(t, TypeAck, func(b []byte) error { _, err := ParseAck(b); return err },
			append(lengths(AckSize), bodyCase{"arrival 2^63", late, false}, bodyCase{"version 4", make([]byte, 16), false}))
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
	hello := helloFrame(testHello)
	challenge := challengeFrame(testChallenge)
	auth := AppendSealed(nil, TypeAuth, testTag)
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
		{"DecodeFrame/challenge", func() {
			if _, _, err := DecodeFrame(challenge, testLim); err != nil {
				panic(err)
			}
		}},
		{"DecodeFrame/auth", func() {
			if _, _, err := DecodeFrame(auth, testLim); err != nil {
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
