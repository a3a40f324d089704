package comm

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/emu"
)

// TestBusyPollDefaults: a zero Transport.BusyPoll polls for
// DefaultBusyPoll, a negative one never, a valid one is kept, one beyond
// multirail.MaxBusyPoll is refused; MULTIRAIL_BUSY_POLL sets it ("0":
// never) unless the program did, and a bad value names the variable.
func TestBusyPollDefaults(t *testing.T) {
	for _, tc := range []struct {
		in, want time.Duration
		bad      bool
	}{
		{0, DefaultBusyPoll, false},
		{-1, 0, false},
		{50 * time.Microsecond, 50 * time.Microsecond, false},
		{multirail.MaxBusyPoll, multirail.MaxBusyPoll, false},
		{multirail.MaxBusyPoll + 1, 0, true},
	} {
		var cfg Config
		cfg.Transport.BusyPoll = tc.in
		out, err := cfg.validate()
		if tc.bad {
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "BusyPoll") {
				t.Errorf("BusyPoll %v: err %v, want ErrConfig naming BusyPoll", tc.in, err)
			}
			continue
		}
		if err != nil || out.Transport.BusyPoll != tc.want {
			t.Errorf("BusyPoll %v: got %v, %v; want %v", tc.in, out.Transport.BusyPoll, err, tc.want)
		}
	}
	for _, tc := range []struct {
		env  string
		set  time.Duration // the program's own setting
		want time.Duration
		bad  bool
	}{
		{"", 0, 0, false},
		{"0", 0, -1, false},
		{"300us", 0, 300 * time.Microsecond, false},
		{"300us", time.Millisecond, time.Millisecond, false},
		{"fast", 0, 0, true},
		{"-1us", 0, 0, true},
		{"11ms", 0, 0, true},
	} {
		cfg := Config{}
		cfg.Transport.BusyPoll = tc.set
		out, err := ConfigFromEnv(cfg, func(k string) (string, bool) {
			if k == EnvBusyPoll && tc.env != "" {
				return tc.env, true
			}
			return "", false
		})
		if tc.bad {
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), EnvBusyPoll) || !strings.Contains(err.Error(), tc.env) {
				t.Errorf("%s=%q: err %v, want ErrConfig naming the variable and value", EnvBusyPoll, tc.env, err)
			}
			continue
		}
		if err != nil || out.Transport.BusyPoll != tc.want {
			t.Errorf("%s=%q over %v: got %v, %v; want %v", EnvBusyPoll, tc.env, tc.set, out.Transport.BusyPoll, err, tc.want)
		}
	}
}

// TestEmuLoad: Config.EmuLoad (or MULTIRAIL_EMU_LOAD) puts the pattern's
// schedule, drawn per rank and rail, on every rank's emulated rails, and
// RestartEmuLoad moves their epoch; a bad pattern or one without Emu is
// refused.
func TestEmuLoad(t *testing.T) {
	for _, cfg := range []Config{{EmuLoad: "bursty"}, {Emu: "emu:100mbit", EmuLoad: "storm"}} {
		if _, err := cfg.validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", cfg, err)
		}
	}
	if _, err := ConfigFromEnv(Config{}, func(k string) (string, bool) {
		return map[string]string{EnvEmuLoad: "phases:calm=0s"}[k], k == EnvEmuLoad
	}); !errors.Is(err, ErrConfig) {
		t.Errorf("MULTIRAIL_EMU_LOAD=phases:calm=0s: %v, want ErrConfig", err)
	}
	cs := local(t, 2, Config{Emu: "emu:100mbit,emu:50mbit", EmuLoad: "phases:calm=1s,congested=1s,seed=4"})
	var first []emu.Load
	for r, c := range cs {
		if len(c.w.emuLinks) != 2 {
			t.Fatalf("rank %d has %d emulated links", r, len(c.w.emuLinks))
		}
		for j, l := range c.w.emuLinks {
			steps := l.Profile().Steps
			if len(steps) < 100 || steps[0].Fraction != 0 {
				t.Fatalf("rank %d rail %d: %d load steps, first %+v (want a schedule starting calm)", r, j, len(steps), steps[0])
			}
			if first == nil {
				first = steps
			} else if slices.Equal(first, steps) {
				t.Fatalf("rank %d rail %d has the same schedule as rank 0 rail 0", r, j)
			}
		}
		before := c.w.emuLinks[0].Epoch()
		c.RestartEmuLoad()
		if !c.w.emuLinks[0].Epoch().After(before) {
			t.Fatal("RestartEmuLoad did not move the epoch")
		}
	}
}

// TestFrameSize: the frames the collectives fill are the transport's
// (multirail.Config.FrameSize and its defaults).
func TestFrameSize(t *testing.T) {
	for _, tc := range []struct {
		seg, frame, want int
	}{
		{0, 0, multirail.DefaultFrameSize},
		{4096, 0, 4096},
		{4096, 16384, 16384},
		{0, 128 << 10, 128 << 10},
	} {
		if got := frameSize(multirail.Config{SegmentSize: tc.seg, FrameSize: tc.frame}); got != tc.want {
			t.Errorf("SegmentSize %d, FrameSize %d: frames of %d, want %d", tc.seg, tc.frame, got, tc.want)
		}
	}
}
