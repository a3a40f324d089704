package reasm

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/multirail/multirail/internal/wire"
)

const testSeg = 512

// segOf returns the header of segment i of a message as the peer sends it,
// passed through wire.PutData, wire.ParseHeader and wire.ParseData with lim
// so that every segment a test feeds in obeys the wire rules.
func segOf(t testing.TB, lim wire.Limits, id uint64, tag uint32, total uint64, i int) wire.Data {
	t.Helper()
	off := uint64(i) * uint64(lim.SegmentSize)
	var n uint32
	if off < total {
		n = uint32(min(uint64(lim.SegmentSize), total-off))
	}
	var b [wire.DataHeaderSize]byte
	wire.PutData(b[:], wire.Data{Message: id, Tag: tag, Total: total, Offset: off, Len: n})
	h, err := wire.ParseHeader(b[:], lim)
	if err != nil {
		t.Fatalf("segment %d of message %d (%d bytes): %v", i, id, total, err)
	}
	d, err := wire.ParseData(h, b[wire.HeaderSize:], lim)
	if err != nil {
		t.Fatalf("segment %d of message %d (%d bytes): %v", i, id, total, err)
	}
	return d
}

// fills builds the expected content of a message of total bytes whose
// segment k consists of the byte fill[k].
func fills(total uint64, fill string) []byte {
	b := make([]byte, total)
	for k := 0; k*testSeg < int(total); k++ {
		end := min((k+1)*testSeg, int(total))
		for j := k * testSeg; j < end; j++ {
			b[j] = fill[k]
		}
	}
	return b
}

// op is one call in a table test script.
type op struct {
	do    string // begin, commit, abort, offer, next, state
	id    uint64
	tag   uint32
	total uint64
	seg   int

	want Verdict // begin: the verdict
	err  error   // begin: the error (errors.Is)
	fill byte    // commit: the payload written into Begin's slice; abort: garbage
	// written there by the failed read; offer: the payload

	next uint64 // next: the id expected, 0 for none
	data string // next: fill of each segment of the expected message

	held    int64  // state
	pending int    // state
	granted uint64 // state: Granted() - Window
	ready   bool   // state
}

func begin(id uint64, tag uint32, total uint64, seg int, want Verdict) op {
	return op{do: "begin", id: id, tag: tag, total: total, seg: seg, want: want}
}

func beginErr(id uint64, tag uint32, total uint64, seg int, err error) op {
	return op{do: "begin", id: id, tag: tag, total: total, seg: seg, err: err}
}

func commit(id uint64, tag uint32, total uint64, seg int, fill byte) op {
	return op{do: "commit", id: id, tag: tag, total: total, seg: seg, fill: fill}
}

func abort(id uint64, tag uint32, total uint64, seg int) op {
	return op{do: "abort", id: id, tag: tag, total: total, seg: seg, fill: 'x'}
}

func offer(id uint64, tag uint32, total uint64, seg int, fill byte) op {
	return op{do: "offer", id: id, tag: tag, total: total, seg: seg, fill: fill}
}

// write is Begin answered with Write followed by Commit of fill.
func write(id uint64, tag uint32, total uint64, seg int, fill byte) []op {
	return []op{begin(id, tag, total, seg, Write), commit(id, tag, total, seg, fill)}
}

func next(id uint64, data string) op { return op{do: "next", id: id, next: id, data: data} }

var none = op{do: "next"}

func state(held int64, pending int, granted uint64, ready bool) op {
	return op{do: "state", held: held, pending: pending, granted: granted, ready: ready}
}

func script(parts ...any) []op {
	var s []op
	for _, p := range parts {
		switch p := p.(type) {
		case op:
			s = append(s, p)
		case []op:
			s = append(s, p...)
		default:
			panic("script: bad part")
		}
	}
	return s
}

type slotKey struct {
	id  uint64
	seg int
}

func runScript(t *testing.T, cfg Config, ops []op) {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lim := r.Limits()
	totals := map[uint64]uint64{} // total of each message, from its begin ops
	dsts := map[slotKey][]byte{}
	for n, o := range ops {
		switch o.do {
		case "begin":
			d := segOf(t, lim, o.id, o.tag, o.total, o.seg)
			dst, v, err := r.Begin(d)
			if o.err != nil {
				if !errors.Is(err, o.err) {
					t.Fatalf("op %d: Begin(msg %d seg %d) error = %v, want %v", n, o.id, o.seg, err, o.err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("op %d: Begin(msg %d seg %d): %v", n, o.id, o.seg, err)
			}
			if v != o.want {
				t.Fatalf("op %d: Begin(msg %d seg %d) = %v, want %v", n, o.id, o.seg, v, o.want)
			}
			if _, ok := totals[o.id]; !ok {
				totals[o.id] = o.total
			}
			if v == Write {
				if len(dst) != int(d.Len) {
					t.Fatalf("op %d: Begin(msg %d seg %d) slice of %d bytes, want %d", n, o.id, o.seg, len(dst), d.Len)
				}
				dsts[slotKey{o.id, o.seg}] = dst
			} else if dst != nil {
				t.Fatalf("op %d: Begin(msg %d seg %d) = %v with a slice of %d bytes", n, o.id, o.seg, v, len(dst))
			}
		case "commit", "abort":
			d := segOf(t, lim, o.id, o.tag, o.total, o.seg)
			dst, ok := dsts[slotKey{o.id, o.seg}]
			if !ok {
				t.Fatalf("op %d: %s of msg %d seg %d without Write", n, o.do, o.id, o.seg)
			}
			delete(dsts, slotKey{o.id, o.seg})
			for i := range dst {
				dst[i] = o.fill
			}
			if o.do == "commit" {
				r.Commit(d)
			} else {
				r.Abort(d)
			}
		case "offer":
			d := segOf(t, lim, o.id, o.tag, o.total, o.seg)
			r.Offer(d, bytes.Repeat([]byte{o.fill}, int(d.Len)))
		case "next":
			m, ok := r.Next()
			if o.next == 0 {
				if ok {
					t.Fatalf("op %d: Next() = message %d, want none", n, m.ID)
				}
				continue
			}
			if !ok {
				t.Fatalf("op %d: Next() = none, want message %d", n, o.next)
			}
			if m.ID != o.next {
				t.Fatalf("op %d: Next() = message %d, want %d", n, m.ID, o.next)
			}
			want := fills(totals[o.next], o.data)
			if !bytes.Equal(m.Data, want) {
				t.Fatalf("op %d: message %d data = %q..., want %q...", n, m.ID, head(m.Data), head(want))
			}
		case "state":
			if got := r.Held(); got != o.held {
				t.Fatalf("op %d: Held() = %d, want %d", n, got, o.held)
			}
			if got := r.Pending(); got != o.pending {
				t.Fatalf("op %d: Pending() = %d, want %d", n, got, o.pending)
			}
			if got := r.Granted(); got != cfg.Window+o.granted {
				t.Fatalf("op %d: Granted() = Window+%d, want Window+%d", n, got-cfg.Window, o.granted)
			}
			if got := r.Ready(); got != o.ready {
				t.Fatalf("op %d: Ready() = %v, want %v", n, got, o.ready)
			}
		default:
			t.Fatalf("op %d: unknown op %q", n, o.do)
		}
	}
}

func head(b []byte) []byte {
	if len(b) > 8 {
		return b[:8]
	}
	return b
}

func TestPaths(t *testing.T) {
	const (
		a, b = 1, 2 // tags
		big  = 3*testSeg + 7
	)
	c1, c100, cBig := Cost(1), Cost(100), Cost(big)
	tests := []struct {
		name string
		ops  []op
	}{
		{"new message, one segment", script(
			state(0, 0, 0, false),
			begin(1, a, 100, 0, Write),
			state(100, 1, 0, false),
			commit(1, a, 100, 0, 'a'),
			state(100, 1, 0, true),
			next(1, "a"),
			state(0, 0, c100, false),
			none,
		)},
		{"new message, segments out of order", script(
			write(1, a, big, 2, 'c'),
			write(1, a, big, 0, 'a'),
			write(1, a, big, 3, 'd'),
			none,
			state(big, 1, 0, false),
			write(1, a, big, 1, 'b'),
			next(1, "abcd"),
			state(0, 0, cBig, false),
		)},
		{"duplicate after delivery is discarded", script(
			write(1, a, 100, 0, 'a'),
			next(1, "a"),
			begin(1, a, 100, 0, Discard),
			state(0, 0, c100, false),
			none,
		)},
		{"duplicate of a multi-segment message after delivery is discarded", script(
			write(1, a, big, 0, 'a'), write(1, a, big, 1, 'b'), write(1, a, big, 2, 'c'), write(1, a, big, 3, 'd'),
			next(1, "abcd"),
			begin(1, a, big, 2, Discard),
			begin(1, a, big, 3, Discard),
			state(0, 0, cBig, false),
		)},
		{"duplicate of a done slot is discarded", script(
			write(1, a, big, 0, 'a'),
			begin(1, a, big, 0, Discard),
			state(big, 1, 0, false),
			write(1, a, big, 1, 'b'), write(1, a, big, 2, 'c'), write(1, a, big, 3, 'd'),
			begin(1, a, big, 3, Discard),
			next(1, "abcd"),
		)},
		{"busy slot holds; abort uses the offered copy", script(
			begin(1, a, 100, 0, Write), // rail 1 reads into the message
			begin(1, a, 100, 0, Hold),  // rail 2 has the same segment
			offer(1, a, 100, 0, 'b'),
			none,
			abort(1, a, 100, 0), // rail 1's read failed half-way
			next(1, "b"),
			state(0, 0, c100, false),
		)},
		{"busy slot holds; commit wins over the copy", script(
			begin(1, a, 100, 0, Write),
			begin(1, a, 100, 0, Hold),
			offer(1, a, 100, 0, 'b'),
			commit(1, a, 100, 0, 'a'),
			next(1, "a"),
		)},
		{"busy slot holds; the first copy is kept", script(
			begin(1, a, 100, 0, Write),
			begin(1, a, 100, 0, Hold),
			begin(1, a, 100, 0, Hold),
			offer(1, a, 100, 0, 'b'),
			offer(1, a, 100, 0, 'c'),
			abort(1, a, 100, 0),
			next(1, "b"),
		)},
		{"offer into a missing slot fills it", script(
			begin(1, a, big, 1, Write),
			begin(1, a, big, 1, Hold),
			abort(1, a, big, 1), // no copy yet: missing again
			state(big, 1, 0, false),
			offer(1, a, big, 1, 'b'),
			begin(1, a, big, 1, Discard),
			write(1, a, big, 0, 'a'), write(1, a, big, 2, 'c'), write(1, a, big, 3, 'd'),
			next(1, "abcd"),
		)},
		{"offer into a missing slot completes the message", script(
			begin(1, a, 100, 0, Write),
			begin(1, a, 100, 0, Hold),
			abort(1, a, 100, 0),
			none,
			offer(1, a, 100, 0, 'b'),
			next(1, "b"),
		)},
		{"abort without a copy returns the slot to missing", script(
			begin(1, a, 100, 0, Write),
			abort(1, a, 100, 0),
			state(100, 1, 0, false),
			write(1, a, 100, 0, 'a'), // resent: taken again
			next(1, "a"),
		)},
		{"offer into a done slot is ignored", script(
			begin(1, a, 100, 0, Write),
			begin(1, a, 100, 0, Hold),
			commit(1, a, 100, 0, 'a'),
			offer(1, a, 100, 0, 'b'),
			next(1, "a"),
		)},
		{"offer, commit and abort after delivery are ignored", script(
			begin(1, a, 100, 0, Write),
			begin(1, a, 100, 0, Hold),
			commit(1, a, 100, 0, 'a'),
			next(1, "a"),
			offer(1, a, 100, 0, 'b'),
			state(0, 0, c100, false),
		)},
		{"inconsistent total", script(
			begin(1, a, 100, 0, Write),
			beginErr(1, a, 200, 0, ErrInconsistent),
			beginErr(1, a, 0, 0, ErrInconsistent),
		)},
		{"inconsistent total on another segment", script(
			begin(1, a, testSeg+88, 1, Write),
			beginErr(1, a, 2*testSeg, 1, ErrInconsistent),
			beginErr(1, a, testSeg, 0, ErrInconsistent),
		)},
		{"inconsistent tag", script(
			begin(1, a, big, 0, Write),
			beginErr(1, b, big, 1, ErrInconsistent),
			beginErr(1, b, big, 0, ErrInconsistent),
		)},
		{"empty messages", script(
			begin(1, a, 0, 0, Write),
			begin(1, a, 0, 0, Hold),
			state(0, 1, 0, false),
			commit(1, a, 0, 0, 0),
			begin(1, a, 0, 0, Discard),
			state(0, 1, 0, true),
			next(1, ""),
			state(0, 0, Cost(0), false),
			begin(1, a, 0, 0, Discard),
			write(3, a, 0, 0, 0),
			begin(2, a, 0, 0, Write),
			none,
			commit(2, a, 0, 0, 0),
			next(2, ""),
			next(3, ""),
			state(0, 0, 3*Cost(0), false),
		)},
		{"empty message: abort uses the offered copy", script(
			begin(1, a, 0, 0, Write),
			begin(1, a, 0, 0, Hold),
			offer(1, a, 0, 0, 0),
			abort(1, a, 0, 0),
			next(1, ""),
		)},
		{"different tags overtake", script(
			write(1, a, big, 0, 'a'),
			write(2, b, 1, 0, 'z'),
			next(2, "z"),
			none,
			write(1, a, big, 1, 'b'), write(1, a, big, 2, 'c'), write(1, a, big, 3, 'd'),
			next(1, "abcd"),
			state(0, 0, cBig+c1, false),
		)},
		{"same tag does not overtake", script(
			begin(1, a, 100, 0, Write),
			write(2, a, 1, 0, 'z'),
			write(3, b, 1, 0, 'y'),
			next(3, "y"),
			none,
			commit(1, a, 100, 0, 'a'),
			next(1, "a"),
			next(2, "z"),
			none,
		)},
		{"an unseen smaller id blocks every tag", script(
			write(2, b, 1, 0, 'z'),
			state(1, 1, 0, false),
			none,
			begin(1, a, 100, 0, Write), // message 1 is now known
			next(2, "z"),
			commit(1, a, 100, 0, 'a'),
			next(1, "a"),
		)},
		{"a gap in the middle blocks what follows it only", script(
			write(3, a, 1, 0, 'c'),
			write(1, b, 1, 0, 'a'),
			next(1, "a"),
			none,
			begin(2, b, 100, 0, Write), // known, incomplete, other tag
			next(3, "c"),
			commit(2, b, 100, 0, 'b'),
			next(2, "b"),
			state(0, 0, 2*c1+c100, false),
		)},
		{"a known message of another tag does not block", script(
			begin(1, b, big, 0, Write),
			write(2, a, 1, 0, 'x'),
			write(3, a, 1, 0, 'y'),
			write(4, a, 1, 0, 'z'),
			next(2, "x"), next(3, "y"), next(4, "z"), none,
		)},
		// Regression: a complete head of a tag's queue that is not taken by
		// Next before the next message of its tag completes was queued for
		// delivery twice.
		{"complete messages of one tag queue up before Next", script(
			write(1, a, 1, 0, 'x'),
			write(2, a, 1, 0, 'y'),
			write(3, a, 1, 0, 'z'),
			state(3, 3, 0, true),
			next(1, "x"), next(2, "y"), next(3, "z"), none,
			state(0, 0, 3*c1, false),
		)},
		{"complete messages of one tag complete in reverse before Next", script(
			begin(1, a, 1, 0, Write), begin(2, a, 1, 0, Write), begin(3, a, 1, 0, Write),
			commit(3, a, 1, 0, 'z'), commit(2, a, 1, 0, 'y'), commit(1, a, 1, 0, 'x'),
			next(1, "x"), next(2, "y"), next(3, "z"), none,
			state(0, 0, 3*c1, false),
		)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runScript(t, Config{SegmentSize: testSeg, MaxMessage: 1 << 20, Window: 4 << 20, MaxCopies: 1 << 20}, tc.ops)
		})
	}
}

func TestCredit(t *testing.T) {
	const max = 2 * testSeg
	c := Cost(max)
	tests := []struct {
		name   string
		max    int64
		window uint64
		ops    []op
	}{
		{"a message beyond the window is rejected", max, c, script(
			begin(1, 1, max, 0, Write),
			state(max, 1, 0, false),
			beginErr(2, 1, 0, 0, ErrCredit),
			state(max, 1, 0, false),
		)},
		{"more segments of a known message cost nothing", max, c, script(
			write(1, 1, max, 1, 'b'),
			write(1, 1, max, 0, 'a'),
			begin(1, 1, max, 0, Discard),
			beginErr(2, 1, 0, 0, ErrCredit),
		)},
		{"a complete message still holds its credit until Next", max, c, script(
			write(1, 1, max, 0, 'a'), write(1, 1, max, 1, 'b'),
			beginErr(2, 1, 0, 0, ErrCredit),
			next(1, "ab"),
			state(0, 0, c, false),
			write(2, 1, max, 0, 'c'), write(2, 1, max, 1, 'd'),
			next(2, "cd"),
			state(0, 0, 2*c, false),
		)},
		{"credit is counted per message cost", 1, 3 * Cost(0), script(
			write(1, 1, 0, 0, 0),
			write(2, 2, 0, 0, 0),
			begin(4, 1, 0, 0, Write), // ids may arrive out of order
			beginErr(3, 1, 1, 0, ErrCredit),
			next(1, ""), // grants Cost(0): still not enough for 1 byte
			beginErr(3, 1, 1, 0, ErrCredit),
			next(2, ""),
			begin(3, 1, 1, 0, Write),
			state(1, 2, 2*Cost(0), false),
		)},
		{"a rejected message is not recorded", max, c, script(
			begin(1, 1, max, 0, Write),
			beginErr(2, 1, max, 0, ErrCredit),
			state(max, 1, 0, false),
			commit(1, 1, max, 0, 'a'), write(1, 1, max, 1, 'b'),
			next(1, "ab"),
			none,
			state(0, 0, c, false),
		)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runScript(t, Config{SegmentSize: testSeg, MaxMessage: tc.max, Window: tc.window}, tc.ops)
		})
	}
}

func TestNewConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"zero", Config{}, false},
		{"segment too small", Config{SegmentSize: wire.MinSegmentSize - 1, MaxMessage: 0, Window: Cost(0)}, false},
		{"segment too large", Config{SegmentSize: wire.MaxSegmentSize + 1, MaxMessage: 0, Window: Cost(0)}, false},
		{"negative max message", Config{SegmentSize: testSeg, MaxMessage: -1, Window: Cost(0)}, false},
		{"window below one message", Config{SegmentSize: testSeg, MaxMessage: 1000, Window: Cost(1000) - 1}, false},
		{"window zero", Config{SegmentSize: testSeg, MaxMessage: 0, Window: 0}, false},
		{"smallest", Config{SegmentSize: wire.MinSegmentSize, MaxMessage: 0, Window: Cost(0)}, true},
		{"largest segment", Config{SegmentSize: wire.MaxSegmentSize, MaxMessage: 1 << 30, Window: Cost(1 << 30)}, true},
		{"window exactly one message", Config{SegmentSize: testSeg, MaxMessage: 1000, Window: Cost(1000)}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := New(tc.cfg)
			if !tc.ok {
				if err == nil {
					t.Fatalf("New(%+v) = nil error, want one", tc.cfg)
				}
				if r != nil {
					t.Fatalf("New(%+v) returned a Reassembler with error %v", tc.cfg, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("New(%+v): %v", tc.cfg, err)
			}
			if got, want := r.Limits(), (wire.Limits{SegmentSize: tc.cfg.SegmentSize, MaxMessage: tc.cfg.MaxMessage}); got != want {
				t.Fatalf("Limits() = %+v, want %+v", got, want)
			}
			if r.Granted() != tc.cfg.Window || r.Held() != 0 || r.Pending() != 0 || r.Ready() {
				t.Fatalf("fresh Reassembler: Granted %d Held %d Pending %d Ready %v", r.Granted(), r.Held(), r.Pending(), r.Ready())
			}
		})
	}
}

// TestNewErrorNamesField checks that the config errors say which field is
// wrong.
func TestNewErrorNamesField(t *testing.T) {
	for field, cfg := range map[string]Config{
		"SegmentSize": {SegmentSize: 1, Window: Cost(0)},
		"MaxMessage":  {SegmentSize: testSeg, MaxMessage: -5, Window: Cost(0)},
		"Window":      {SegmentSize: testSeg, MaxMessage: 10, Window: 10},
	} {
		_, err := New(cfg)
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("New(%+v) = %v, want an error naming %s", cfg, err, field)
		}
	}
}

// TestCostOverhead pins the credit cost of a message.
func TestCostOverhead(t *testing.T) {
	if Cost(0) != Overhead || Cost(1000) != 1000+Overhead {
		t.Fatalf("Cost(0) = %d, Cost(1000) = %d", Cost(0), Cost(1000))
	}
}

// TestLongTagQueue delivers hundreds of messages that were all known before
// any completed, completing them in a shuffled order and draining Next as
// they become deliverable: the tags' FIFOs grow long and are compacted on
// the way while they still hold messages.
func TestLongTagQueue(t *testing.T) {
	const n = 400
	const size = 10
	r, err := New(Config{SegmentSize: testSeg, MaxMessage: size, Window: n * Cost(size)})
	if err != nil {
		t.Fatal(err)
	}
	lim := r.Limits()
	tagOf := func(id uint64) uint32 { return uint32(min(id%9, 1)) } // mostly tag 1
	ds := make([]wire.Data, n+1)
	dsts := make([][]byte, n+1)
	for id := uint64(1); id <= n; id++ {
		ds[id] = segOf(t, lim, id, tagOf(id), size, 0)
		dst, v, err := r.Begin(ds[id])
		if err != nil || v != Write {
			t.Fatalf("Begin(message %d) = %v, %v", id, v, err)
		}
		dsts[id] = dst
	}
	last := map[uint32]uint64{}
	got := 0
	for _, k := range rand.New(rand.NewPCG(1, 2)).Perm(n) {
		id := uint64(k + 1)
		for i := range dsts[id] {
			dsts[id][i] = byte(id)
		}
		r.Commit(ds[id])
		for {
			m, ok := r.Next()
			if !ok {
				break
			}
			got++
			if m.ID <= last[m.Tag] {
				t.Fatalf("message %d of tag %d after message %d", m.ID, m.Tag, last[m.Tag])
			}
			last[m.Tag] = m.ID
			if m.Tag != tagOf(m.ID) || !bytes.Equal(m.Data, bytes.Repeat([]byte{byte(m.ID)}, size)) {
				t.Fatalf("message %d: tag %d data %v", m.ID, m.Tag, m.Data)
			}
		}
	}
	if got != n || r.Pending() != 0 || r.Held() != 0 || r.Granted() != 2*n*Cost(size) {
		t.Fatalf("delivered %d of %d; Pending %d Held %d Granted %d", got, n, r.Pending(), r.Held(), r.Granted())
	}
}

// TestStrayCalls checks that Commit, Abort and Offer for a segment that is
// not being read (unknown or delivered message, missing or received slot)
// change nothing.
func TestStrayCalls(t *testing.T) {
	r, err := New(Config{SegmentSize: testSeg, MaxMessage: 4 * testSeg, Window: 8 * testSeg})
	if err != nil {
		t.Fatal(err)
	}
	lim := r.Limits()
	const total = 2 * testSeg
	s0, s1 := segOf(t, lim, 2, 1, total, 0), segOf(t, lim, 2, 1, total, 1)
	unknown := segOf(t, lim, 9, 1, total, 0)
	stray := func() {
		r.Commit(unknown)
		r.Abort(unknown)
		r.Offer(unknown, make([]byte, testSeg))
		r.Commit(s1) // missing slot
		r.Abort(s1)
	}
	stray()
	if r.Pending() != 0 || r.Held() != 0 {
		t.Fatalf("stray calls on nothing: Pending %d Held %d", r.Pending(), r.Held())
	}
	dst, _, _ := r.Begin(s0)
	copy(dst, bytes.Repeat([]byte{'a'}, testSeg))
	r.Commit(s0)
	stray()
	r.Commit(s0) // received slot
	r.Abort(s0)
	r.Offer(s0, bytes.Repeat([]byte{'x'}, testSeg))
	r.Offer(s1, []byte("short")) // wrong length: dropped
	if _, v, _ := r.Begin(s0); v != Discard {
		t.Fatalf("Begin(received slot) = %v, want Discard", v)
	}
	dst, v, _ := r.Begin(s1)
	if v != Write {
		t.Fatalf("Begin(missing slot) = %v, want Write", v)
	}
	copy(dst, bytes.Repeat([]byte{'b'}, testSeg))
	r.Commit(s1)
	if r.Pending() != 1 || r.Ready() {
		t.Fatalf("message 2 released while message 1 was never seen: Pending %d Ready %v", r.Pending(), r.Ready())
	}
	s := segOf(t, lim, 1, 1, 0, 0)
	r.Begin(s)
	r.Commit(s)
	if m, ok := r.Next(); !ok || m.ID != 1 {
		t.Fatalf("Next() = %d %v, want message 1", m.ID, ok)
	}
	m, ok := r.Next()
	if !ok || m.ID != 2 || !bytes.Equal(m.Data, fills(total, "ab")) {
		t.Fatalf("Next() = %d %v %q..., want message 2 \"ab\"", m.ID, ok, head(m.Data))
	}
	stray()
	r.Commit(s0)
	r.Abort(s0)
	r.Offer(s0, make([]byte, testSeg))
	if r.Pending() != 0 || r.Held() != 0 || r.Ready() {
		t.Fatalf("stray calls after delivery: Pending %d Held %d Ready %v", r.Pending(), r.Held(), r.Ready())
	}
}
