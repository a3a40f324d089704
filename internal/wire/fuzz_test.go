package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

// reencode parses the frame DecodeFrame accepted with the parser of its
// type and encodes the result again with the matching encoder. The bodies
// of CHALLENGE, AUTH and WELCOME are sealed: opaque to the codec, they
// only have a fixed length.
func reencode(t *testing.T, frame []byte, h Header, lim Limits) []byte {
	t.Helper()
	body := frame[HeaderSize:]
	var err error
	var out []byte
	switch h.Type {
	case TypeHello:
		var m Hello
		var rest []byte
		m, rest, err = ParseHelloPrefix(body)
		if err != nil {
			break
		}
		checkHelloPrefix(t, m)
		if len(rest) != HelloSize-HelloPrefixSize || !bytes.Equal(rest, body[HelloPrefixSize:]) {
			t.Fatalf("ParseHelloPrefix rest of %d bytes for a hello of %d", len(rest), len(body))
		}
		out = AppendHello(nil, m, rest)
	case TypeChallenge, TypeAuth, TypeWelcome:
		size := map[uint8]int{TypeChallenge: ChallengeSize, TypeAuth: AuthSize, TypeWelcome: WelcomeSize}[h.Type]
		if len(body) != size {
			t.Fatalf("accepted a frame of type %#x with a body of %d bytes (want %d)", h.Type, len(body), size)
		}
		out = AppendSealed(nil, h.Type, body)
	case TypeReject:
		var m Reject
		m, err = ParseReject(body)
		out = AppendReject(nil, m)
	case TypeAck:
		var a Ack
		a, err = ParseAck(body)
		out = AppendAck(nil, a)
	case TypeGoAway:
		var code uint16
		code, err = ParseGoAway(body)
		out = AppendGoAway(nil, code)
	case TypePing:
		out = AppendPing(nil)
	case TypeData:
		var d Data
		d, err = ParseData(h, body[:DataFixedSize], lim)
		if err != nil {
			break
		}
		checkData(t, d, lim)
		if d.Flags&FlagCRC != 0 && Checksum(body[DataFixedSize:]) != d.CRC {
			t.Fatalf("accepted a DATA frame whose checksum does not match")
		}
		if int(d.Len) != len(body)-DataFixedSize {
			t.Fatalf("Data.Len %d for a payload of %d bytes", d.Len, len(body)-DataFixedSize)
		}
		out = make([]byte, DataHeaderSize+int(d.Len))
		PutData(out, d)
		copy(out[DataHeaderSize:], body[DataFixedSize:])
	case TypeSmall:
		var (
			a   Ack
			ok  bool
			d   Data
			pay []byte
		)
		a, ok, d, pay, err = ParseSmall(h, body, lim)
		if err != nil {
			break
		}
		checkSmall(t, h, d, pay, lim)
		out = smallFrame(d.Flags, d.Message, d.Tag, pay, ok, a)
	default:
		t.Fatalf("DecodeFrame accepted frame type %#x", h.Type)
	}
	if err != nil {
		t.Fatalf("DecodeFrame accepted a frame of type %#x its parser rejects: %v", h.Type, err)
	}
	return out
}

// checkHelloPrefix checks the promises ParseHelloPrefix makes about a
// hello it accepts: this version, known flags, not join and rejoin at
// once, and nothing but the clear fields set.
func checkHelloPrefix(t *testing.T, m Hello) {
	t.Helper()
	if m.Version != Version {
		t.Fatalf("accepted version %d", m.Version)
	}
	if m.Flags&^(HelloRejoin|HelloJoin|HelloPlaintext) != 0 {
		t.Fatalf("accepted hello flags %#x", m.Flags)
	}
	if m.Flags&HelloRejoin != 0 && m.Flags&HelloJoin != 0 {
		t.Fatalf("accepted join and rejoin at once (flags %#x)", m.Flags)
	}
	if m != helloPrefixOf(m) {
		t.Fatalf("ParseHelloPrefix set fields of the sealed part: %+v", m)
	}
}

// checkHelloParams checks the promises ParseHelloParams makes about the
// parameters it accepts.
func checkHelloParams(t *testing.T, m Hello) {
	t.Helper()
	if m.Rails == 0 || m.Rail >= m.Rails {
		t.Fatalf("accepted rail %d of %d", m.Rail, m.Rails)
	}
	if m.SegmentSize < MinSegmentSize || m.SegmentSize > MaxSegmentSize {
		t.Fatalf("accepted segment size %d", m.SegmentSize)
	}
}

// checkData checks the promises ParseData makes about a segment it accepts.
func checkData(t *testing.T, d Data, lim Limits) {
	t.Helper()
	if d.Message == 0 {
		t.Fatal("accepted message id 0")
	}
	if d.Flags&FlagCRC == 0 && d.CRC != 0 {
		t.Fatal("accepted a CRC without FlagCRC")
	}
	if lim.SegmentSize <= 0 {
		t.Fatalf("accepted a segment with segment size %d", lim.SegmentSize)
	}
	seg := uint64(lim.SegmentSize)
	if lim.MaxMessage >= 0 && d.Total > uint64(lim.MaxMessage) {
		t.Fatalf("accepted a message of %d bytes, limit %d", d.Total, lim.MaxMessage)
	}
	if d.Offset%seg != 0 {
		t.Fatalf("accepted offset %d with segment size %d", d.Offset, seg)
	}
	if d.Total == 0 {
		if d.Offset != 0 || d.Len != 0 {
			t.Fatalf("accepted segment %d+%d of an empty message", d.Offset, d.Len)
		}
		return
	}
	// The payload is the rest of the message or a whole number of
	// segments, at most MaxPayload.
	rest := d.Total - d.Offset
	if d.Offset >= d.Total || d.Len == 0 || uint64(d.Len) > rest || d.Len > uint32(MaxPayload(int(seg))) ||
		(uint64(d.Len) != rest && uint64(d.Len)%seg != 0) {
		t.Fatalf("accepted segment %d+%d of a %d-byte message with segment size %d", d.Offset, d.Len, d.Total, seg)
	}
}

func fuzzSeeds() [][]byte {
	p := payload(3000 - 2*testSeg)
	var stream []byte
	for _, rt := range roundTrips() {
		stream = append(stream, rt.frame...)
	}
	// A HELLO of version 3: 64 bytes, the magic and version 3.
	v3 := append(hdr(TypeHello, 0, 0, 0, 64), helloFrame(testHello)[HeaderSize:HeaderSize+64]...)
	v3[HeaderSize+4] = 3
	seeds := [][]byte{
		helloFrame(testHello),
		helloFrame(Hello{Version: Version, Flags: HelloJoin | HelloPlaintext, Rails: 1, SegmentSize: MinSegmentSize}),
		v3,
		challengeFrame(testChallenge),
		AppendSealed(nil, TypeAuth, testTag),
		AppendSealed(nil, TypeWelcome, testTag),
		AppendReject(nil, Reject{Code: RejectAuth, Reason: "bad proof"}),
		dataFrame(Data{Session: 1, Message: 1, Tag: 2, Total: 3000, Offset: testSeg}, payload(testSeg)),
		dataFrame(crcData(Data{Session: 1, Message: 1, Tag: 2, Total: 3000, Offset: 2 * testSeg}, p), p),
		dataFrame(Data{Session: 1, Message: 2, Total: 0}, nil),
		AppendAck(nil, Ack{Received: 3, Credit: 1 << 20, Arrived: 25_000_000}),
		append(hdr(TypeAck, 0, 0, 0, 16), make([]byte, 16)...), // version 4's ACK
		AppendGoAway(nil, GoAwayClose),
		AppendPing(nil),
		stream,
	}
	return seeds
}

func FuzzDecodeFrame(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s, testSeg, int64(1<<20))
	}
	f.Fuzz(func(t *testing.T, b []byte, seg int, maxMessage int64) {
		lim := Limits{SegmentSize: seg, MaxMessage: maxMessage}
		for len(b) > 0 {
			h, n, err := DecodeFrame(b, lim)
			if err != nil {
				if n != 0 {
					t.Fatalf("error %v with n = %d", err, n)
				}
				if err != ErrShort && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrVersion) {
					t.Fatalf("error %q wraps neither ErrMalformed nor ErrVersion", err)
				}
				if errors.Is(err, ErrVersion) {
					// Only a whole HELLO with the magic and another
					// version.
					if h.Type != TypeHello || len(b) < HeaderSize+int(h.Len) {
						t.Fatalf("version error on frame type %#x of %d bytes (%d here)", h.Type, h.Len, len(b))
					}
					body := b[HeaderSize : HeaderSize+int(h.Len)]
					m, _, perr := ParseHelloPrefix(body)
					if !errors.Is(perr, ErrVersion) || len(body) < 5 || [4]byte(body[:4]) != Magic || m.Version != body[4] || m.Version == Version {
						t.Fatalf("version error for hello %x: ParseHelloPrefix = %+v, %v", body, m, perr)
					}
				}
				return
			}
			if n < HeaderSize || n > len(b) || n != HeaderSize+int(h.Len) {
				t.Fatalf("DecodeFrame consumed %d of %d bytes for header %+v", n, len(b), h)
			}
			if ph, err := ParseHeader(b, lim); err != nil || ph != h {
				t.Fatalf("ParseHeader = %+v, %v; DecodeFrame said %+v", ph, err, h)
			}
			if h.Type != TypeData && h.Type != TypeSmall && h.Len > MaxControlBody {
				t.Fatalf("control frame %#x with a body of %d bytes", h.Type, h.Len)
			}
			frame := b[:n]
			// The frame does not depend on what follows it, and any
			// prefix of it is incomplete.
			if _, n2, err := DecodeFrame(frame, lim); err != nil || n2 != n {
				t.Fatalf("frame alone: %d, %v", n2, err)
			}
			for _, k := range []int{0, HeaderSize - 1, HeaderSize, n - 1} {
				if k >= 0 && k < n {
					if _, _, err := DecodeFrame(frame[:k], lim); err != ErrShort {
						t.Fatalf("prefix of %d of %d bytes: %v, want ErrShort", k, n, err)
					}
				}
			}
			if out := reencode(t, frame, h, lim); !bytes.Equal(out, frame) {
				t.Fatalf("re-encoding changed the frame:\n got %x\nwant %x", out, frame)
			}
			b = b[n:]
		}
	})
}

// FuzzParseHelloPrefix: any body either fails (ErrVersion exactly when it
// has the magic and another version, ErrMalformed otherwise), the same
// way DecodeFrame judges it as a HELLO frame, or decodes to a prefix that
// re-encodes to the same bytes.
func FuzzParseHelloPrefix(f *testing.F) {
	good := helloFrame(testHello)[HeaderSize:]
	f.Add(good)
	f.Add(helloFrame(Hello{Version: Version, Flags: HelloJoin | HelloPlaintext, Rails: 1, SegmentSize: MinSegmentSize})[HeaderSize:])
	f.Add(mutate(good, func(b []byte) { b[4] = 3 })[:64])
	f.Add([]byte("MRLY\x06"))
	f.Add(mutate(good, func(b []byte) { b[4] = 4 })) // version 4: ACKs without arrival times
	f.Add(good[:HelloPrefixSize])
	f.Add(mutate(good, func(b []byte) { b[5] = HelloJoin | HelloRejoin }))
	f.Add(mutate(good, func(b []byte) { b[7] = 1 }))
	f.Add([]byte("GET / HTTP/1.1\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, rest, err := ParseHelloPrefix(b)
		if len(b) <= MaxControlBody {
			frame := append(hdr(TypeHello, 0, 0, 0, uint32(len(b))), b...)
			_, n, ferr := DecodeFrame(frame, Limits{})
			if (ferr == nil) != (err == nil) || errors.Is(ferr, ErrVersion) != errors.Is(err, ErrVersion) || (err == nil && n != len(frame)) {
				t.Fatalf("as a frame: DecodeFrame = %d, %v; ParseHelloPrefix: %v", n, ferr, err)
			}
		}
		otherVersion := len(b) >= 5 && [4]byte(b[:4]) == Magic && b[4] != Version
		if err != nil {
			if errors.Is(err, ErrVersion) != otherVersion {
				t.Fatalf("error %q for a body with magic %q and version %d", err, b[:min(4, len(b))], b[min(4, len(b)-1)])
			}
			if otherVersion {
				if errors.Is(err, ErrMalformed) {
					t.Fatalf("version error %q wraps ErrMalformed", err)
				}
				if m.Version != b[4] {
					t.Fatalf("version error with Version %d, the body says %d", m.Version, b[4])
				}
				return
			}
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %q does not wrap ErrMalformed", err)
			}
			return
		}
		if otherVersion || len(b) != HelloSize {
			t.Fatalf("accepted a hello of %d bytes, version %d", len(b), b[4])
		}
		checkHelloPrefix(t, m)
		if !bytes.Equal(rest, b[HelloPrefixSize:]) {
			t.Fatalf("rest %x of body %x", rest, b)
		}
		if got := append(AppendHelloPrefix(nil, m), rest...); !bytes.Equal(got, b) {
			t.Fatalf("re-encoding %+v gives %x, input %x", m, got, b)
		}
	})
}

// FuzzParseHelloParams: any input either fails with ErrMalformed or
// decodes to parameters that re-encode to the same bytes, leaving the
// fields of the clear prefix alone.
func FuzzParseHelloParams(f *testing.F) {
	good := AppendHelloParams(nil, testHello)
	f.Add(good)
	f.Add(AppendHelloParams(nil, Hello{Rail: 0, Rails: 1, SegmentSize: MinSegmentSize}))
	f.Add(AppendHelloParams(nil, Hello{Rail: math.MaxUint16 - 1, Rails: math.MaxUint16, SegmentSize: MaxSegmentSize, Window: math.MaxUint64, MaxMessage: math.MaxUint64}))
	f.Add(AppendHelloParams(nil, Hello{Rail: 3, Rails: 3, SegmentSize: MinSegmentSize}))
	f.Add(AppendHelloParams(nil, Hello{Rails: 0, SegmentSize: MinSegmentSize}))
	f.Add(AppendHelloParams(nil, Hello{Rails: 1, SegmentSize: MaxSegmentSize + 1}))
	f.Add(mutate(good, func(b []byte) { b[5] = 1 }))
	f.Add(good[:HelloParamsSize-1])
	f.Fuzz(func(t *testing.T, b []byte) {
		m := Hello{Version: 0xee, Flags: 0xdd, Session: seq16(0x77)}
		if err := ParseHelloParams(b, &m); err != nil {
			if !errors.Is(err, ErrMalformed) || errors.Is(err, ErrVersion) {
				t.Fatalf("error %q does not wrap ErrMalformed only", err)
			}
			return
		}
		if len(b) != HelloParamsSize {
			t.Fatalf("accepted parameters of %d bytes", len(b))
		}
		if m.Version != 0xee || m.Flags != 0xdd || m.Session != seq16(0x77) {
			t.Fatalf("ParseHelloParams changed the prefix fields: %+v", m)
		}
		checkHelloParams(t, m)
		if got := AppendHelloParams(nil, m); !bytes.Equal(got, b) {
			t.Fatalf("re-encoding %+v gives %x, input %x", m, got, b)
		}
	})
}

// FuzzParseChallengeParams: any input either fails with ErrMalformed or
// decodes to parameters that re-encode to the same bytes.
func FuzzParseChallengeParams(f *testing.F) {
	good := AppendChallengeParams(nil, testChallenge)
	f.Add(good)
	f.Add(AppendChallengeParams(nil, Challenge{SegmentSize: MaxSegmentSize, Window: math.MaxUint64, MaxMessage: math.MaxUint64}))
	f.Add(AppendChallengeParams(nil, Challenge{Flags: 0x02, SegmentSize: MinSegmentSize}))
	f.Add(AppendChallengeParams(nil, Challenge{SegmentSize: MinSegmentSize - 1}))
	f.Add(mutate(good, func(b []byte) { b[2] = 1 }))
	f.Add(good[:ChallengeParams-1])
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseChallengeParams(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) || errors.Is(err, ErrVersion) {
				t.Fatalf("error %q does not wrap ErrMalformed only", err)
			}
			return
		}
		if len(b) != ChallengeParams {
			t.Fatalf("accepted parameters of %d bytes", len(b))
		}
		if m.Flags&^ChallengePlaintext != 0 {
			t.Fatalf("accepted challenge flags %#x", m.Flags)
		}
		if m.SegmentSize < MinSegmentSize || m.SegmentSize > MaxSegmentSize {
			t.Fatalf("accepted segment size %d", m.SegmentSize)
		}
		if got := AppendChallengeParams(nil, m); !bytes.Equal(got, b) {
			t.Fatalf("re-encoding %+v gives %x, input %x", m, got, b)
		}
	})
}

func FuzzParseData(f *testing.F) {
	add := func(d Data, seg int, maxMessage int64) {
		h, fixed := dataFixed(d)
		f.Add(h.Flags, h.Len, fixed, seg, maxMessage)
	}
	add(Data{Session: 1, Message: 1, Tag: 2, Total: 3000, Len: testSeg}, testSeg, 1<<20)
	add(Data{Session: 1, Message: 1, Tag: 2, Total: 3000, Offset: 2 * testSeg, Len: 3000 - 2*testSeg, Flags: FlagCRC, CRC: 0xdeadbeef}, testSeg, 1<<20)
	add(Data{Message: 7}, MinSegmentSize, 0)
	add(Data{Message: 0, Total: 10, Len: 10}, testSeg, 1<<20)
	add(Data{Message: 1, Total: 10, Offset: 1, Len: 9}, testSeg, 1<<20)
	add(Data{Message: 1, Total: 1 << 40, Offset: 1 << 39, Len: MaxSegmentSize}, MaxSegmentSize, -1)
	f.Fuzz(func(t *testing.T, flags uint8, length uint32, fixed []byte, seg int, maxMessage int64) {
		h := Header{Type: TypeData, Flags: flags, Len: length}
		lim := Limits{SegmentSize: seg, MaxMessage: maxMessage}
		d, err := ParseData(h, fixed, lim)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %q does not wrap ErrMalformed", err)
			}
			return
		}
		if len(fixed) != DataFixedSize || length < DataFixedSize {
			t.Fatalf("accepted a fixed part of %d bytes with a body of %d", len(fixed), length)
		}
		if d.Flags != flags || d.Len != length-DataFixedSize {
			t.Fatalf("flags %#x len %d from header flags %#x len %d", d.Flags, d.Len, flags, length)
		}
		checkData(t, d, lim)
		b := make([]byte, DataHeaderSize)
		PutData(b, d)
		if ph := (Header{Type: b[0], Flags: b[1], Len: binary.BigEndian.Uint32(b[4:8])}); ph != h || b[2] != 0 || b[3] != 0 {
			t.Fatalf("PutData header %x for %+v", b[:HeaderSize], h)
		}
		if !bytes.Equal(b[HeaderSize:], fixed) {
			t.Fatalf("PutData gives %x, parsed from %x", b[HeaderSize:], fixed)
		}
		// The header of an accepted segment passes ParseHeader unless it
		// carries an unknown flag (ParseData leaves flags to ParseHeader).
		got, err := ParseHeader(b, lim)
		if flags&^DataFlags == 0 && (err != nil || got != h) {
			t.Fatalf("ParseHeader of an accepted segment's header = %+v, %v", got, err)
		}
		if flags&^DataFlags != 0 && err == nil {
			t.Fatalf("ParseHeader accepted flags %#x", flags)
		}
	})
}

// FuzzParseStagePacket: any input either fails with ErrMalformed or decodes
// to a header that re-encodes to the same bytes.
func FuzzParseStagePacket(f *testing.F) {
	f.Add(AppendStagePacket(nil, StagePacket{Stage: 3, Part: 1, Parts: 6, Index: 1, Total: 4, Sent: 3}, []byte("abc")))
	f.Add(AppendStagePacket(nil, StagePacket{Stage: 0, Parts: 1, Index: 0, Total: 1, Sent: 1}, nil))
	f.Add(AppendStagePacket(nil, StagePacket{Stage: 1, Parts: 1, Index: 5, Total: 4, Sent: 3}, nil))
	f.Add(AppendStagePacket(nil, StagePacket{Stage: 1, Part: 2, Parts: 2, Index: 0, Total: 4, Sent: 3}, nil))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, payload, err := ParseStagePacket(b, 1<<16)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if p.Index >= p.Total || p.Sent == 0 || p.Sent > p.Total || p.Total > 1<<16 || p.Part >= p.Parts || p.Parts > MaxStageParts {
			t.Fatalf("accepted %+v", p)
		}
		if got := AppendStagePacket(nil, p, payload); !bytes.Equal(got, b) {
			t.Fatalf("re-encoding %+v gives %x, input %x", p, got, b)
		}
	})
}

// FuzzParseStageFeedback: as FuzzParseStagePacket, for feedback.
func FuzzParseStageFeedback(f *testing.F) {
	f.Add(AppendStageFeedback(nil, StageFeedback{Kind: FeedbackPeriod, Stage: 7, Received: 9, Period: 12345}))
	f.Add(AppendStageFeedback(nil, StageFeedback{Kind: FeedbackQuality, Stage: 7, Quality: -0.25}))
	f.Add(AppendStageFeedback(nil, StageFeedback{Kind: 3}))
	f.Add(make([]byte, StageFeedbackSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		fb, err := ParseStageFeedback(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if fb.Period < 0 || math.IsNaN(fb.Quality) || math.IsInf(fb.Quality, 0) {
			t.Fatalf("accepted %+v", fb)
		}
		if got := AppendStageFeedback(nil, fb); !bytes.Equal(got, b) {
			t.Fatalf("re-encoding %+v gives %x, input %x", fb, got, b)
		}
	})
}

// checkSmall checks the promises ParseSmall makes about a SMALL frame it
// accepts: a whole message at offset 0 with a message id, a payload
// within the bounds and only the eager flag carried over.
func checkSmall(t *testing.T, h Header, d Data, pay []byte, lim Limits) {
	t.Helper()
	if d.Message == 0 || d.Offset != 0 || d.Session != 0 || d.CRC != 0 || d.Flags&^FlagEager != 0 {
		t.Fatalf("ParseSmall accepted %+v", d)
	}
	if int(d.Len) != len(pay) || d.Total != uint64(len(pay)) || len(pay) > min(MaxSmallPayload, lim.SegmentSize) {
		t.Fatalf("ParseSmall: %+v with a payload of %d bytes (segment %d)", d, len(pay), lim.SegmentSize)
	}
	if lim.MaxMessage >= 0 && d.Total > uint64(lim.MaxMessage) {
		t.Fatalf("ParseSmall accepted a message of %d bytes over the limit %d", d.Total, lim.MaxMessage)
	}
	if h.Flags&FlagEager != d.Flags {
		t.Fatalf("flags %#x became %#x", h.Flags, d.Flags)
	}
}

// FuzzParseSmall: any SMALL body under any accepted header either fails
// with ErrMalformed or decodes to a message within the limits whose
// encoding gives back the same frame.
func FuzzParseSmall(f *testing.F) {
	a := Ack{Received: 5, Credit: 0x10000, Arrived: 1500000}
	f.Add(uint8(0), smallFrame(0, 9, 7, []byte("abc"), false, Ack{})[HeaderSize:], uint16(testSeg), int64(1<<20))
	f.Add(FlagAck|FlagEager, smallFrame(FlagEager, 9, 7, payload(48), true, a)[HeaderSize:], uint16(testSeg), int64(1<<20))
	f.Add(uint8(0), smallFrame(0, 0, 7, nil, false, Ack{})[HeaderSize:], uint16(512), int64(0))
	f.Add(FlagAck, make([]byte, AckSize+SmallFixedSize+1), uint16(512), int64(-1))
	f.Fuzz(func(t *testing.T, flags uint8, body []byte, seg uint16, maxMsg int64) {
		lim := Limits{SegmentSize: int(seg), MaxMessage: maxMsg}
		h := Header{Type: TypeSmall, Flags: flags, Len: uint32(len(body))}
		frame := make([]byte, HeaderSize, HeaderSize+len(body))
		PutHeader(frame, h)
		frame = append(frame, body...)
		if _, err := ParseHeader(frame, lim); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("ParseHeader: %v does not wrap ErrMalformed", err)
			}
			return
		}
		a, ok, d, pay, err := ParseSmall(h, body, lim)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("ParseSmall: %v does not wrap ErrMalformed", err)
			}
			return
		}
		checkSmall(t, h, d, pay, lim)
		if ok != (flags&FlagAck != 0) {
			t.Fatalf("ack %v for flags %#x", ok, flags)
		}
		if out := smallFrame(d.Flags, d.Message, d.Tag, pay, ok, a); !bytes.Equal(out, frame) {
			t.Fatalf("re-encoding changed the frame:\n got %x\nwant %x", out, frame)
		}
	})
}
