package discard

import (
	"errors"
	"strings"
	"testing"
)

func TestParseOptions(t *testing.T) {
	c, err := ParseOptions(" up=0.2, down=0.02,k=4,th1=0.01,th2=0.5,max=0.6,initial=0.1,raw=true,pending=8", Config{})
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Initial: 0.1, Up: 0.2, Down: 0.02, QualityThreshold: 0.01, DelayThreshold: 0.5, Max: 0.6, History: 4, Pending: 8, RawPeriod: true,
		Rule: RulePatent, Window: DefaultWindow, Margin: DefaultMargin, Ramp: DefaultRamp, Rise: DefaultRise, CalmCap: DefaultCalmCap, Share: DefaultShare}
	if c != want {
		t.Fatalf("got %+v, want %+v", c, want)
	}
	if c, err := ParseOptions("rule=Match,window=50,margin=0.1,ramp=2,rise=0.25,cap=3,share=0.5", Config{}); err != nil || c.Rule != RuleMatch || c.Window != 50 || c.Margin != 0.1 ||
		c.Ramp != 2 || c.Rise != 0.25 || c.CalmCap != 3 || c.Share != 0.5 {
		t.Fatalf("match options: %+v %v", c, err)
	}
	if c, err := ParseOptions("", Config{Up: 0.3}); err != nil || c.Up != 0.3 || c.Max != DefaultMax {
		t.Fatalf("empty options: %+v %v", c, err)
	}
	for _, tc := range []struct{ in, msg string }{
		{"up", "want key=value"},
		{"speed=1", `unknown key "speed"`},
		{"up=fast", `up="fast": not a valid value`},
		{"k=1", "History = 1"},
		{"max=1.5", "Max = 1.5"},
		{"th2=-1", "DelayThreshold = -1"},
		{"initial=0.9", "Initial = 0.9"},
		{"rule=pid", `Rule = "pid"`},
		{"window=1", "Window = 1"},
		{"margin=-0.5", "Margin = -0.5"},
		{"ramp=-1", "Ramp = -1"},
		{"rise=1.5", "Rise = 1.5"},
		{"cap=0.5", "CalmCap = 0.5"},
		{"share=1.5", "Share = 1.5"},
		{"share=-0.1", "Share = -0.1"},
	} {
		_, err := ParseOptions(tc.in, Config{})
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("ParseOptions(%q) = %v, want an error containing %q", tc.in, err, tc.msg)
		}
	}
}
