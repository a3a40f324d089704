package qlearn

import (
	"errors"
	"strings"
	"testing"

	"github.com/multirail/multirail/sched"
)

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name   string
		preset Preset
		cfg    Config
		want   string // substring of the error; "" = valid
	}{
		{"patent defaults", Patent, Config{}, ""},
		{"improved defaults", Improved, Config{}, ""},
		{"patent k=8", Patent, Config{K: 8}, ""},
		{"patent k=32", Patent, Config{K: 32}, ""},
		{"patent k=7", Patent, Config{K: 7}, "K = 7, need 8..32"},
		{"patent k=33", Patent, Config{K: 33}, "K = 33, need 8..32"},
		{"improved k=2", Improved, Config{K: 2}, ""},
		{"improved k=1", Improved, Config{K: 1}, "K = 1, need 2..64"},
		{"negative k", Patent, Config{K: -3}, "K = -3"},
		{"beta 1", Patent, Config{Beta: F(1)}, ""},
		{"beta > 1", Patent, Config{Beta: F(1.5)}, "Beta = 1.5, need 0..1"},
		{"beta < 0", Improved, Config{Beta: F(-0.1)}, "Beta = -0.1, need 0..1"},
		{"gamma 0", Patent, Config{Gamma: F(0)}, ""},
		{"gamma 1", Patent, Config{Gamma: F(1)}, ""},
		{"gamma > 1", Patent, Config{Gamma: F(1.01)}, "Gamma = 1.01, need 0..1"},
		{"gamma < 0", Improved, Config{Gamma: F(-1)}, "Gamma = -1, need 0..1"},
		{"queue factor", Patent, Config{QueueFactor: -1}, "QueueFactor = -1"},
		{"queue factor big", Patent, Config{QueueFactor: 65}, "QueueFactor = 65"},
		{"penalty", Patent, Config{Penalty: F(-1)}, "Penalty = -1, need 0..64"},
		{"epsilon", Improved, Config{Epsilon: F(2)}, "Epsilon = 2, need 0..1"},
		{"epsilon min above epsilon", Improved, Config{Epsilon: F(0.05), EpsilonMin: F(0.1)}, "EpsilonMin = 0.1, need 0..Epsilon (0.05)"},
		{"no exploration", Improved, Config{Epsilon: F(0), EpsilonMin: F(0)}, ""},
		{"epsilon decay", Improved, Config{EpsilonDecay: 0.5}, "EpsilonDecay = 0.5, need 1..1e9"},
		{"history", Improved, Config{History: 70000}, "History = 70000, need 1..65536"},
		{"wait factor", Improved, Config{WaitFactor: F(-1)}, "WaitFactor = -1, need 0..1e6"},
		{"never wait", Improved, Config{WaitFactor: F(0)}, ""},
		{"outlier factor 1", Improved, Config{OutlierFactor: 1}, ""},
		{"outlier factor below 1", Improved, Config{OutlierFactor: 0.5}, "OutlierFactor = 0.5, need 1..1e9"},
		{"outlier factor negative", Improved, Config{OutlierFactor: -2}, "OutlierFactor = -2, need 1..1e9"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(c.preset, sched.Config{Rails: 3}, c.cfg)
			if c.want == "" {
				if err != nil {
					t.Fatalf("New: %v, want no error", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New: %v, want an error containing %q", err, c.want)
			}
			if !errors.Is(err, sched.ErrConfig) || !errors.Is(err, ErrConfig) {
				t.Errorf("error %v does not wrap sched.ErrConfig and qlearn.ErrConfig", err)
			}
			if !strings.Contains(err.Error(), c.preset.String()) {
				t.Errorf("error %q does not name the preset %s", err, c.preset)
			}
		})
	}
}

func TestNewNeedsRails(t *testing.T) {
	if _, err := New(Improved, sched.Config{}, Config{}); !errors.Is(err, sched.ErrConfig) {
		t.Fatalf("New with 0 rails: %v, want ErrConfig", err)
	}
}

func TestRegistered(t *testing.T) {
	for _, name := range []string{Name, NamePatent} {
		s, err := sched.New(name, sched.Config{Rails: 4})
		if err != nil {
			t.Fatalf("sched.New(%q): %v", name, err)
		}
		if s.Name() != name {
			t.Errorf("Name() = %q, want %q", s.Name(), name)
		}
		if _, ok := s.(sched.Explainer); !ok {
			t.Errorf("%s does not implement sched.Explainer", name)
		}
	}
}

func TestParseOptions(t *testing.T) {
	c, err := ParseOptions(" k=12, beta=0.3,gamma=0, queue-factor=2, penalty=3, random-ties=true, epsilon=0.2, epsilon-min=0, epsilon-decay=500, outlier-factor=3, idle-probe=2, small-probe=0.5, ack-ride=1.5, history=64 ")
	if err != nil {
		t.Fatal(err)
	}
	if c.K != 12 || *c.Beta != 0.3 || c.Gamma == nil || *c.Gamma != 0 || c.QueueFactor != 2 ||
		*c.Penalty != 3 || !c.RandomTies || *c.Epsilon != 0.2 || *c.EpsilonMin != 0 ||
		c.EpsilonDecay != 500 || c.OutlierFactor != 3 || c.History != 64 ||
		c.IdleProbe == nil || *c.IdleProbe != 2 || c.SmallProbe == nil || *c.SmallProbe != 0.5 ||
		c.AckRide == nil || *c.AckRide != 1.5 {
		t.Fatalf("ParseOptions = %+v", c)
	}
	if c, err := ParseOptions(""); err != nil || c.K != 0 || c.Gamma != nil {
		t.Fatalf("ParseOptions(\"\") = %+v, %v; want zero Config", c, err)
	}
	for _, bad := range []struct{ in, want string }{
		{"k", `"k": want key=value`},
		{"k=x", `k="x": want an integer`},
		{"beta=fast", `beta="fast": want a number`},
		{"gamma=NaN", `gamma="NaN": want a number`},
		{"random-ties=perhaps", `want true or false`},
		{"alpha=1", `"alpha": unknown key`},
	} {
		if _, err := ParseOptions(bad.in); err == nil || !strings.Contains(err.Error(), bad.want) || !strings.HasPrefix(err.Error(), "qlearn: ") {
			t.Errorf("ParseOptions(%q) = %v, want error starting with qlearn: and containing %q", bad.in, err, bad.want)
		}
	}
	// Syntax is fine, the range is checked by New.
	c, err = ParseOptions("k=40")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Patent, sched.Config{Rails: 2}, c); err == nil || !strings.Contains(err.Error(), "K = 40, need 8..32") {
		t.Fatalf("New with k=40: %v", err)
	}
	if _, err := New(Improved, sched.Config{Rails: 2}, Config{SmallProbe: F(-1)}); err == nil || !strings.Contains(err.Error(), "SmallProbe = -1, need 0..1e6 seconds") {
		t.Fatalf("New with SmallProbe -1: %v", err)
	}
	if _, err := New(Improved, sched.Config{Rails: 2}, Config{AckRide: F(-0.5)}); err == nil || !strings.Contains(err.Error(), "AckRide = -0.5, need 0..1e6") {
		t.Fatalf("New with AckRide -0.5: %v", err)
	}
}

// TestAckRide: a small segment goes on the rail where an acknowledgement
// is due while that rail's value is within AckRide of the best rail's,
// and by the values alone otherwise (a larger segment, a rail clearly
// slower, AckRide 0, the best rail itself due).
func TestAckRide(t *testing.T) {
	for _, tc := range []struct {
		name string
		ride *float64 // nil: the default (2)
		size int
		slow int64 // rail 1's delay; rail 0's is 20 us
		due  [2]bool
		want int
	}{
		{"due rail within the default", nil, 100, 35e3, [2]bool{false, true}, 1},
		{"due rail clearly slower", nil, 100, 45e3, [2]bool{false, true}, 0},
		{"large segment", nil, SmallProbeBytes + 1, 35e3, [2]bool{false, true}, 0},
		{"off", F(0), 100, 35e3, [2]bool{false, true}, 0},
		{"nothing due", nil, 100, 35e3, [2]bool{false, false}, 0},
		{"best rail due too", nil, 100, 35e3, [2]bool{true, true}, 0},
		{"wider", F(3), 100, 55e3, [2]bool{false, true}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(Improved, sched.Config{Rails: 2}, Config{AckRide: tc.ride, Epsilon: F(0), EpsilonMin: F(0), SmallProbe: F(0)})
			if err != nil {
				t.Fatal(err)
			}
			ob := s.(sched.DeliveryObserver)
			rails := []sched.RailState{{Up: true, QueueCap: 8}, {Up: true, QueueCap: 8}}
			ob.Delivered(0, 0, 0, 0, rails)
			delay := [2]int64{20e3, tc.slow}
			for a := range 2 { // one sample per rail: the values are the delays
				if got := s.Pick(0, 100, rails); got != a {
					// Unseen rails are worth 0: rail 0 first, then rail 1.
					t.Fatalf("learning pick %d went to rail %d", a, got)
				}
				s.Departed(0, a, 100, 0, rails)
				ob.Delivered(delay[a], a, 100, delay[a], rails)
			}
			rails[0].AckDue, rails[1].AckDue = tc.due[0], tc.due[1]
			if got := s.Pick(1e6, tc.size, rails); got != tc.want {
				t.Fatalf("Pick = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestOptionsThroughRegistry(t *testing.T) {
	if _, err := sched.New(NamePatent, sched.Config{Rails: 2, Options: "k=8,gamma=0"}); err != nil {
		t.Fatalf("valid options: %v", err)
	}
	for _, c := range []struct{ name, opts, want string }{
		{NamePatent, "k=4", "qlearn-patent: K = 4, need 8..32"},
		{Name, "beta=2", "qlearn: Beta = 2, need 0..1"},
		{Name, "speed=3", `qlearn: scheduler option "speed": unknown key`},
		{sched.NameRoundRobin, "k=8", `roundrobin takes no options, got "k=8"`},
		{sched.NameShortestQueue, "k=8", `shortestqueue takes no options`},
	} {
		_, err := sched.New(c.name, sched.Config{Rails: 2, Bandwidths: []float64{1, 1}, Options: c.opts})
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, sched.ErrConfig) {
			t.Errorf("sched.New(%s, Options %q) = %v, want ErrConfig containing %q", c.name, c.opts, err, c.want)
		}
	}
	_, err := sched.New(sched.NameWeighted, sched.Config{Rails: 1, Bandwidths: []float64{1}, Options: "x=1"})
	if err == nil || !strings.Contains(err.Error(), "weighted takes no options") {
		t.Errorf("weighted with options: %v", err)
	}
}
