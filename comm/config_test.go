package comm

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/multirail/multirail"
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
