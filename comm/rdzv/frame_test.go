package rdzv

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
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

// FuzzReadFrame: no input makes the frame reader or a decoder panic or
// allocate past its limit, and whatever decodes encodes back to the same
// bytes.
func FuzzReadFrame(f *testing.F) {
	f.Add(frameBytes(tHello, append([]byte(magic+"\x01"), make([]byte, nonceSize)...)))
	f.Add(frameBytes(tCard, append(appendCardBody(nil, Card{JobID: "j", Rank: 1, Size: 2, Data: []byte("d")}), make([]byte, macSize)...)))
	f.Add(frameBytes(tStatus, status{registered: 1, size: 3, missing: 2, ranges: [][2]int{{0, 0}, {2, 2}}}.encode()))
	f.Add(frameBytes(tTable, append(encodeTable([][]byte{[]byte("a"), nil}), make([]byte, macSize)...)))
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
		case tCard:
			cb, _, err := splitMAC(body)
			if err != nil {
				return
			}
			if c, err := decodeCardBody(cb, DefaultMaxCard); err == nil {
				if got := appendCardBody(nil, c); !bytes.Equal(got, cb) {
					t.Fatalf("card %x re-encodes as %x", cb, got)
				}
			}
		case tStatus:
			if st, err := decodeStatus(body); err == nil {
				if got := st.encode(); !bytes.Equal(got, body) {
					t.Fatalf("status %x re-encodes as %x", body, got)
				}
			}
		case tTable:
			tb, _, err := splitMAC(body)
			if err != nil || len(tb) < 4 {
				return
			}
			n := int(tb[0])<<24 | int(tb[1])<<16 | int(tb[2])<<8 | int(tb[3])
			if table, err := decodeTable(tb, n); err == nil {
				if got := encodeTable(table); !bytes.Equal(got, tb) {
					t.Fatalf("table %x re-encodes as %x", tb, got)
				}
			}
		}
	})
}

func frameBytes(typ byte, body []byte) []byte {
	var b bytes.Buffer
	writeFrame(&b, typ, body)
	return b.Bytes()
}
