package lossy

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/internal/wire"
	"github.com/multirail/multirail/lossy/discard"
)

func stagePair(t *testing.T, cfg StageConfig) (*StageConn, *StageConn) {
	t.Helper()
	a, b := emuPair(t, 400e6, 200e6)
	sa, err := NewStageConn(a, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := NewStageConn(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sa.Close(); sb.Close() })
	return sa, sb
}

func testPackets(stage, n, size int) [][]byte {
	ps := make([][]byte, n)
	for i := range ps {
		ps[i] = bytes.Repeat([]byte{byte(stage), byte(i)}, size/2)
	}
	return ps
}

// TestStageRoundTrip: every stage arrives with exactly the packets the
// seeded selection kept, byte for byte; the feedback comes back; the
// controller follows the rule; Stats shows it on both connections.
func TestStageRoundTrip(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A huge delay threshold keeps the raise branch out of this test (the
	// periods of real sockets vary); package discard tests every branch.
	cfg := StageConfig{Seed: 42, Discard: discard.Config{Initial: 0.3, Down: 0.1, Max: 0.6, DelayThreshold: 1000}}
	sa, sb := stagePair(t, cfg)
	const n, size = 50, 2048
	// Quality falls at stage 2: the rate must go 0 -> 0.3 (stage 0's
	// feedback) -> 0.3 -> 0.2.
	quality := []float64{1, 1, 0.5, 0.5}
	wantRates := []float64{0, 0.3, 0.3, 0.2}
	for s := range quality {
		sent, err := sa.Send(ctx, testPackets(s, n, size))
		if err != nil {
			t.Fatal(err)
		}
		if sent.Number != uint64(s) || math.Abs(sent.Rate-wantRates[s]) > 1e-9 {
			t.Fatalf("stage %d sent as %+v, want rate %v", s, sent, wantRates[s])
		}
		// The same seed gives the same choice.
		pcg := rand.NewPCG(42, uint64(s)<<16) // part 0
		drop := make([]bool, n)
		if d := discard.Select(rand.New(pcg), n, sent.Rate, drop); d != sent.Dropped {
			t.Fatalf("stage %d: dropped %d, the seeded selection drops %d", s, sent.Dropped, d)
		}
		got, err := sb.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got.Number != uint64(s) || len(got.Packets) != n || got.Received != n-sent.Dropped || got.Period < 0 {
			t.Fatalf("stage %d received as number %d, %d packets, %d received (sent %+v)", s, got.Number, len(got.Packets), got.Received, sent)
		}
		want := testPackets(s, n, size)
		for i, p := range got.Packets {
			if drop[i] != (p == nil) {
				t.Fatalf("stage %d packet %d: dropped=%v but received=%v", s, i, drop[i], p != nil)
			}
			if p != nil && !bytes.Equal(p, want[i]) {
				t.Fatalf("stage %d packet %d corrupted", s, i)
			}
		}
		if err := sb.ReportQuality(ctx, got.Number, quality[s]); err != nil {
			t.Fatal(err)
		}
		waitFor(ctx, t, "the feedback of a stage", func() bool { return sa.Stats().Controller.Applied == uint64(s+1) })
	}
	st := sa.Conn().Stats().Stages
	if st == nil {
		t.Fatal("Conn.Stats().Stages is nil on a StageConn's connection")
	}
	if st.StagesSent != 4 || st.Controller.Lowered != 1 || math.Abs(st.Rate-0.2) > 1e-9 || len(st.RecentRates) != 4 || st.Controller.Received == 0 {
		t.Fatalf("sender stats %+v", st)
	}
	if rs := sb.Stats(); rs.StagesReceived != 4 || rs.QualitiesReported != 4 {
		t.Fatalf("receiver stats %+v", rs)
	}
	// The controller knows a packet's wire time at the rails' nominal
	// rates (400 + 200 Mbit/s).
	if want := time.Duration(float64(size+wire.StagePacketHeaderSize) * 8 / 600e6 * 1e9); st.Controller.Wire != want {
		t.Fatalf("sender's wire time %v, want %v", st.Controller.Wire, want)
	}
	// ...and its cycle: the time between the last two stages' starts
	// (each waited for the previous one's feedback, so it is not zero).
	if st.Controller.Cycle <= 0 {
		t.Fatalf("sender's cycle %v, want the time between its stages", st.Controller.Cycle)
	}
}

// TestStageStaleFeedback: quality for a stage never sent or reported
// twice is ignored and counted, never applied.
func TestStageStaleFeedback(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sa, sb := stagePair(t, StageConfig{})
	if _, err := sa.Send(ctx, testPackets(0, 4, 100)); err != nil {
		t.Fatal(err)
	}
	st, err := sb.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		stage uint64
		v     float64
	}{{99, 1}, {st.Number, 1}, {st.Number, -5}} {
		if err := sb.ReportQuality(ctx, q.stage, q.v); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(ctx, t, "the ignored feedback to be counted", func() bool {
		st := sa.Stats()
		return st.FeedbackIgnored == 1 && st.Controller.Stale == 1
	})
	if c := sa.Stats().Controller; c.Applied != 1 || c.Quality != 1 {
		t.Fatalf("controller %+v: the repeated quality was applied", c)
	}
	if err := sb.ReportQuality(ctx, 0, 0/zero()); err == nil {
		t.Fatal("NaN quality accepted")
	}
}

func zero() float64 { return 0 }

// TestStageHostilePeer: a peer that breaks the stage protocol loses its
// connection; the StageConn reports why; another pair is untouched.
// emptyPackets is a whole stage of n empty packets.
func emptyPackets(n int) []multirail.Message {
	var ms []multirail.Message
	for i := 0; i < n; i++ {
		ms = append(ms, multirail.Message{Tag: DefaultStagePacketTag, Data: wire.AppendStagePacket(nil, wire.StagePacket{Stage: 0, Parts: 1, Index: uint32(i), Total: uint32(n), Sent: uint32(n)}, nil)})
	}
	return ms
}

func TestStageHostilePeer(t *testing.T) {
	pkt := func(h wire.StagePacket, payload string) []byte {
		return wire.AppendStagePacket(nil, h, []byte(payload))
	}
	for _, tc := range []struct {
		name string
		msgs []multirail.Message
	}{
		{"short packet", []multirail.Message{{Tag: DefaultStagePacketTag, Data: []byte{1, 2}}}},
		{"index beyond total", []multirail.Message{{Tag: DefaultStagePacketTag, Data: pkt(wire.StagePacket{Stage: 0, Parts: 1, Index: 9, Total: 3, Sent: 3}, "x")}}},
		{"duplicate packet", []multirail.Message{
			{Tag: DefaultStagePacketTag, Data: pkt(wire.StagePacket{Stage: 0, Parts: 1, Index: 1, Total: 3, Sent: 2}, "x")},
			{Tag: DefaultStagePacketTag, Data: pkt(wire.StagePacket{Stage: 0, Parts: 1, Index: 1, Total: 3, Sent: 2}, "x")},
		}},
		{"another stage before this one is complete", []multirail.Message{
			{Tag: DefaultStagePacketTag, Data: pkt(wire.StagePacket{Stage: 0, Parts: 1, Index: 0, Total: 3, Sent: 2}, "x")},
			{Tag: DefaultStagePacketTag, Data: pkt(wire.StagePacket{Stage: 1, Parts: 1, Index: 0, Total: 3, Sent: 2}, "x")},
		}},
		{"stage number going back", []multirail.Message{
			{Tag: DefaultStagePacketTag, Data: pkt(wire.StagePacket{Stage: 5, Parts: 1, Index: 0, Total: 1, Sent: 1}, "x")},
			{Tag: DefaultStagePacketTag, Data: pkt(wire.StagePacket{Stage: 5, Parts: 1, Index: 0, Total: 1, Sent: 1}, "x")},
		}},
		{"part 1 first", []multirail.Message{{Tag: DefaultStagePacketTag, Data: pkt(wire.StagePacket{Stage: 0, Part: 1, Parts: 2, Index: 0, Total: 1, Sent: 1}, "x")}}},
		{"parts skipped", []multirail.Message{
			{Tag: DefaultStagePacketTag, Data: pkt(wire.StagePacket{Stage: 0, Part: 0, Parts: 3, Index: 0, Total: 1, Sent: 1}, "x")},
			{Tag: DefaultStagePacketTag, Data: pkt(wire.StagePacket{Stage: 0, Part: 2, Parts: 3, Index: 0, Total: 1, Sent: 1}, "x")},
		}},
		{"new stage before the last part", []multirail.Message{
			{Tag: DefaultStagePacketTag, Data: pkt(wire.StagePacket{Stage: 0, Part: 0, Parts: 2, Index: 0, Total: 1, Sent: 1}, "x")},
			{Tag: DefaultStagePacketTag, Data: pkt(wire.StagePacket{Stage: 1, Part: 0, Parts: 2, Index: 0, Total: 1, Sent: 1}, "x")},
		}},
		{"more bytes than allowed", []multirail.Message{{Tag: DefaultStagePacketTag, Data: pkt(wire.StagePacket{Stage: 0, Parts: 1, Index: 0, Total: 2, Sent: 2}, string(make([]byte, 2000)))}}},
		// Memory counts as allocated: 24 bytes per announced packet, and
		// every packet's buffer, empty ones too.
		{"more packets announced than the bound holds", []multirail.Message{{Tag: DefaultStagePacketTag, Data: pkt(wire.StagePacket{Stage: 0, Parts: 1, Index: 0, Total: 100, Sent: 100}, "")}}},
		{"empty packets beyond the bound", emptyPackets(40)},
		{"bad feedback", []multirail.Message{{Tag: DefaultStageFeedbackTag, Data: []byte{9}}}},
		{"unknown tag", []multirail.Message{{Tag: 77, Data: []byte("hi")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			a, b := emuPair(t, 100e6)
			sb, err := NewStageConn(b, StageConfig{MaxStageBytes: 1000})
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close()
			defer a.Close()
			// A good pair next to it keeps working.
			ga, gb := stagePair(t, StageConfig{})
			for _, m := range tc.msgs {
				if err := a.Send(ctx, m.Tag, m.Data); err != nil {
					break // cut off before the last message: checked below
				}
			}
			var got Stage
			for err == nil {
				got, err = sb.Recv(ctx)
			}
			if !errors.Is(err, ErrStageProtocol) {
				t.Fatalf("Recv = %v (last stage %d), want ErrStageProtocol", err, got.Number)
			}
			// The peer may first get feedback on a stage it completed.
			for {
				if _, err := a.Recv(ctx); err != nil {
					if ctx.Err() != nil {
						t.Fatal("the hostile peer's connection is still open")
					}
					break
				}
			}
			if _, err := ga.Send(ctx, testPackets(1, 3, 10)); err != nil {
				t.Fatal(err)
			}
			if _, err := gb.Recv(ctx); err != nil {
				t.Fatalf("the other pair broke: %v", err)
			}
		})
	}
}

func TestStageConfigErrors(t *testing.T) {
	a, b := emuPair(t, 100e6)
	defer a.Close()
	defer b.Close()
	for _, cfg := range []StageConfig{
		{Discard: discard.Config{History: 1}},
		{Discard: discard.Config{Max: 2}},
		{MaxPackets: -1},
		{MaxStageBytes: -5},
		{Queue: 5000},
		{FixedRate: 1},
		{FixedRate: -0.1},
		{FixedRate: 0.3, Reliable: true},
	} {
		if _, err := NewStageConn(a, cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("NewStageConn(%+v) = %v, want ErrConfig", cfg, err)
		}
	}
	s, err := NewStageConn(a, StageConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Send(context.Background(), nil); !errors.Is(err, ErrEmptyStage) {
		t.Fatalf("empty stage: %v", err)
	}
}

// TestStageParts: a stage sent in parts arrives part by part, at the
// stage's one rate; its period adds up the parts' and leaves out the
// sender's pauses between them; it is reported once, for the whole stage.
func TestStageParts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sa, sb := stagePair(t, StageConfig{Discard: discard.Config{Initial: 0.4, DelayThreshold: 1000}})
	const gap = 30 * time.Millisecond
	for s := range 3 {
		var rates []float64
		for part := range 3 {
			if part > 0 {
				time.Sleep(gap) // the sender is busy between parts
			}
			sent, err := sa.SendPart(ctx, testPackets(part, 20, 64), part, 3)
			if err != nil {
				t.Fatal(err)
			}
			rates = append(rates, sent.Rate)
			got, err := sb.Recv(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got.Number != uint64(s) || got.Part != part || got.Parts != 3 || got.Received != 20-sent.Dropped {
				t.Fatalf("stage %d part %d received as %d part %d of %d, %d packets", s, part, got.Number, got.Part, got.Parts, got.Received)
			}
			if part == 2 {
				if got.Period >= 2*gap {
					t.Fatalf("stage period %v counts the %v pauses between parts", got.Period, 2*gap)
				}
				if err := sb.ReportQuality(ctx, got.Number, 1); err != nil {
					t.Fatal(err)
				}
			}
		}
		if rates[0] != rates[1] || rates[1] != rates[2] {
			t.Fatalf("stage %d parts sent at rates %v", s, rates)
		}
		waitFor(ctx, t, "the stage's feedback", func() bool { return sa.Stats().Controller.Applied == uint64(s+1) })
	}
	st := sa.Stats()
	if st.StagesSent != 3 || st.Controller.Period >= 2*gap || st.Controller.Received == 0 || st.PacketsDropped == 0 {
		t.Fatalf("stats %+v", st)
	}
	if rs := sb.Stats(); rs.StagesReceived != 3 {
		t.Fatalf("receiver counted %d stages, want 3", rs.StagesReceived)
	}
	for _, bad := range [][2]int{{1, 3}, {0, 0}, {3, 3}} {
		if _, err := sa.SendPart(ctx, testPackets(0, 1, 8), bad[0], bad[1]); !errors.Is(err, ErrStageOrder) {
			t.Fatalf("SendPart(part %d of %d) = %v, want ErrStageOrder", bad[0], bad[1], err)
		}
	}
	if _, err := sa.SendPart(ctx, testPackets(0, 1, 8), 0, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := sa.SendPart(ctx, testPackets(0, 1, 8), 0, 2); !errors.Is(err, ErrStageOrder) {
		t.Fatalf("a new stage before the open one's last part: %v, want ErrStageOrder", err)
	}
}

// TestStageWhole: a stage sent whole loses nothing whatever the rate, and
// feedback on it does not reach the controller.
func TestStageWhole(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sa, sb := stagePair(t, StageConfig{Discard: discard.Config{Initial: 0.5, DelayThreshold: 1000}})
	// Stage 0 sets the rate to 0.5 once its feedback is in.
	if _, err := sa.Send(ctx, testPackets(0, 10, 8)); err != nil {
		t.Fatal(err)
	}
	st, err := sb.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.ReportQuality(ctx, st.Number, 1); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "stage 0's feedback", func() bool { return sa.Stats().Rate == 0.5 })
	for part := range 2 {
		sent, err := sa.SendPartWhole(ctx, testPackets(part, 10, 8), part, 2)
		if err != nil {
			t.Fatal(err)
		}
		got, err := sb.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if sent.Dropped != 0 || sent.Rate != 0 || got.Received != 10 || got.Number != 1 {
			t.Fatalf("part %d sent as %+v, received %d packets of stage %d", part, sent, got.Received, got.Number)
		}
	}
	if err := sb.ReportQuality(ctx, 1, -100); err != nil {
		t.Fatal(err)
	}
	// The whole stage's period and quality are ignored; the next
	// controlled stage is the controller's stage 1.
	waitFor(ctx, t, "the whole stage's feedback to be ignored", func() bool { return sa.Stats().FeedbackIgnored == 2 })
	sent, err := sa.Send(ctx, testPackets(2, 10, 8))
	if err != nil {
		t.Fatal(err)
	}
	if sent.Number != 2 || sent.Rate != 0.5 || sa.Stats().Controller.Stages != 2 {
		t.Fatalf("next stage sent as %+v; controller %+v", sent, sa.Stats().Controller)
	}
}

// TestStageSetFixedRate: SetFixedRate pins the rate from the next stage
// on, 0 hands it back to the controller, and bad rates are refused.
func TestStageSetFixedRate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sa, sb := stagePair(t, StageConfig{Seed: 3, Discard: discard.Config{Initial: 0.1, DelayThreshold: 1000}})
	const n = 50
	// The controller gets no feedback here: its rate stays 0.
	for s, c := range []struct {
		set  float64
		want int // packets of 50 dropped
	}{{0, 0}, {0.6, 30}, {0.2, 10}, {0, 0}} {
		if err := sa.SetFixedRate(c.set); err != nil {
			t.Fatal(err)
		}
		sent, err := sa.Send(ctx, testPackets(s, n, 64))
		if err != nil {
			t.Fatal(err)
		}
		if sent.Dropped < c.want-1 || sent.Dropped > c.want {
			t.Fatalf("stage %d after SetFixedRate(%v): %d of %d dropped at rate %v, want %d", s, c.set, sent.Dropped, n, sent.Rate, c.want)
		}
		if _, err := sb.Recv(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []float64{-0.1, 1, math.NaN()} {
		if err := sa.SetFixedRate(r); !errors.Is(err, ErrConfig) {
			t.Errorf("SetFixedRate(%v) = %v, want ErrConfig", r, err)
		}
	}
	rel, _ := stagePair(t, StageConfig{Reliable: true})
	if err := rel.SetFixedRate(0.3); !errors.Is(err, ErrConfig) {
		t.Errorf("SetFixedRate(0.3) on a reliable StageConn = %v, want ErrConfig", err)
	}
}

// TestStageFixedRate: with FixedRate every stage is sent at that rate,
// whatever the feedback (falling quality would lower the controller's),
// while the controller keeps deciding for Stats; a whole stage still
// discards nothing.
func TestStageFixedRate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sa, sb := stagePair(t, StageConfig{Seed: 7, FixedRate: 0.4, Discard: discard.Config{Initial: 0.3, Down: 0.1, DelayThreshold: 1000}})
	const n = 50
	for s := range 4 {
		sent, err := sa.Send(ctx, testPackets(s, n, 64))
		if err != nil {
			t.Fatal(err)
		}
		if sent.Rate != 0.4 || sent.Dropped < 19 || sent.Dropped > 20 {
			t.Fatalf("stage %d sent as %+v, want rate 0.4 and 20 of 50 dropped", s, sent)
		}
		if _, err := sb.Recv(ctx); err != nil {
			t.Fatal(err)
		}
		if err := sb.ReportQuality(ctx, sent.Number, 1/float64(s+1)); err != nil {
			t.Fatal(err)
		}
	}
	sent, err := sa.SendPartWhole(ctx, testPackets(9, n, 64), 0, 1)
	if err != nil || sent.Dropped != 0 {
		t.Fatalf("whole stage: %+v, %v", sent, err)
	}
	if _, err := sb.Recv(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the controller to apply the feedback", func() bool { return sa.Stats().Controller.Applied >= 2 })
	if st := sa.Stats(); st.Controller.Lowered == 0 || st.Rate != 0.4 {
		t.Fatalf("the controller never lowered its rate on falling quality: %+v", st.Controller)
	}
}
