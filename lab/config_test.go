package lab

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestValidateDefaults(t *testing.T) {
	c, err := Config{}.Validate()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Rates, DefaultRates) || c.Prefix != "mr" || c.CC != "cubic" || c.TBFLatency != 20*time.Millisecond || c.Offloads {
		t.Fatalf("defaults: %+v", c)
	}
	// The defaults are copies: changing them does not change DefaultRates.
	c.Rates[0] = 1
	if DefaultRates[0] != 200e6 {
		t.Fatal("Validate returned DefaultRates itself")
	}
}

func TestValidateErrors(t *testing.T) {
	many := make([]float64, 9)
	for i := range many {
		many[i] = 10e6
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string // substrings of the one-line error
	}{
		{"no rails", Config{Rates: []float64{}}, []string{"Config.Rates", "0 rails", "1..8"}},
		{"nine rails", Config{Rates: many}, []string{"Config.Rates", "9 rails", "1..8"}},
		{"zero rate", Config{Rates: []float64{100e6, 0}}, []string{"Config.Rates[1]", "0 bit/s", "1e6..1e10"}},
		{"too fast", Config{Rates: []float64{20e9}}, []string{"Config.Rates[0]", "2e+10", "1e6..1e10"}},
		{"prefix", Config{Prefix: "m r"}, []string{"Config.Prefix", `"m r"`, "letter"}},
		{"prefix digit", Config{Prefix: "1mr"}, []string{"Config.Prefix", `"1mr"`}},
		{"prefix long", Config{Prefix: strings.Repeat("a", 16)}, []string{"Config.Prefix"}},
		{"cc", Config{CC: "Cubic!"}, []string{"Config.CC", `"Cubic!"`, "a-z"}},
		{"latency low", Config{TBFLatency: time.Microsecond}, []string{"Config.TBFLatency", "1µs", "1ms..1s"}},
		{"latency high", Config{TBFLatency: 2 * time.Second}, []string{"Config.TBFLatency", "2s", "1ms..1s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cfg.Validate()
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrConfig) {
				t.Errorf("%v does not wrap ErrConfig", err)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error is not one line: %q", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
		})
	}
}

func TestBurst(t *testing.T) {
	for _, tc := range []struct {
		rate float64
		want int64
	}{
		{200e6, 100000}, // one 4 ms jiffy of 25 MB/s
		{100e6, 50000},
		{50e6, 25000},
		{32e6, 16000},
		{10e6, 16000}, // floor
		{1e6, 16000},
		{1e9, 500000},
		{10e9, 5000000},
	} {
		if got := Burst(tc.rate); got != tc.want {
			t.Errorf("Burst(%g) = %d, want %d", tc.rate, got, tc.want)
		}
	}
}

func TestAddressPlan(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{RailIP(0, 0), "10.10.1.1"},
		{RailIP(1, 0), "10.10.1.2"},
		{RailIP(0, 2), "10.10.3.1"},
		{RailIP(1, 7), "10.10.8.2"},
		{RailNet(1), "10.10.2.0/24"},
		{CtlIP(0), "10.10.99.1"},
		{CtlIP(1), "10.10.99.2"},
		{CtlNet(), "10.10.99.0/24"},
		{RailDev(3), "rail3"},
		{NSName("mr", 0), "mrA"},
		{NSName("mrb", 1), "mrbB"},
		{HostsPath("mrA"), "/etc/netns/mrA/hosts"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	if c := GoodputCeiling(350e6); c < 334.7e6 || c > 334.8e6 {
		t.Errorf("GoodputCeiling(350e6) = %g, want 334.7 Mbit/s", c)
	}
}

func TestPlan(t *testing.T) {
	cfg, err := Config{Rates: []float64{200e6, 10e6}, Prefix: "t"}.Validate()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, s := range Plan(cfg) {
		lines = append(lines, s.String())
	}
	all := strings.Join(lines, "\n")
	for _, want := range []string{
		"ip netns add tA",
		"ip netns add tB",
		"ip netns exec tA sysctl -w net.ipv4.tcp_congestion_control=cubic",
		"ip netns exec tB sysctl -w net.ipv4.tcp_no_metrics_save=1",
		"ip netns exec tA sysctl -w net.ipv4.conf.all.rp_filter=0",
		"ip netns exec tB sysctl -w net.ipv4.conf.default.rp_filter=0",
		"ip -n tA link add rail0 type veth peer name rail0 netns tB",
		"ip -n tA addr add 10.10.1.1/24 dev rail0",
		"ip -n tB addr add 10.10.2.2/24 dev rail1",
		"ip netns exec tB ethtool -K rail1 tso off gso off gro off",
		"tc -n tA qdisc replace dev rail0 root tbf rate 200000000bit burst 100000 latency 20000us",
		"tc -n tB qdisc replace dev rail1 root tbf rate 10000000bit burst 16000 latency 20000us",
		"ip -n tA link add ctl type veth peer name ctl netns tB",
		"ip -n tB addr add 10.10.99.2/24 dev ctl",
		"ip -n tA mptcp limits set subflows 8 add_addr_accepted 8",
		"ip -n tB mptcp endpoint add 10.10.2.2 dev rail1 signal",
		"write /etc/netns/tA/hosts",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("plan lacks %q", want)
		}
	}
	// rail0's address is what the dialer connects to: never announced.
	if strings.Contains(all, "endpoint add 10.10.1.2") {
		t.Error("plan announces rail0")
	}
	// Sysctls come before the links, so that rail interfaces inherit
	// rp_filter=0 from conf.default.
	idx := func(s string) int {
		return slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, s) })
	}
	if idx("conf.default.rp_filter") > idx("link add rail0") {
		t.Error("conf.default.rp_filter is set after the rails are made")
	}
	if got := strings.Count(all, "tbf"); got != 4 {
		t.Errorf("%d tbf qdiscs, want 4 (2 rails x 2 ends)", got)
	}
	hosts := Plan(cfg)[len(Plan(cfg))-1]
	if hosts.Data != "127.0.0.1 localhost\n10.10.99.1 tA\n10.10.99.2 tB\n" {
		t.Errorf("hosts file %q", hosts.Data)
	}

	cfg.Offloads = true
	for _, s := range Plan(cfg) {
		if strings.Contains(s.String(), "ethtool") {
			t.Errorf("Offloads kept on, yet %q", s)
		}
	}
}

func TestCCList(t *testing.T) {
	for _, tc := range []struct {
		list, cc, with string
		added          bool
		without        string
	}{
		{"reno bbr", "cubic", "reno bbr cubic", true, "reno bbr"},
		{"reno bbr cubic", "cubic", "reno bbr cubic", false, "reno bbr"},
		{"", "cubic", "cubic", true, ""},
		{"  reno   bbr ", "bbr", "reno bbr", false, "reno"},
	} {
		w, added := withCC(tc.list, tc.cc)
		if w != tc.with || added != tc.added {
			t.Errorf("withCC(%q, %q) = %q, %v; want %q, %v", tc.list, tc.cc, w, added, tc.with, tc.added)
		}
		if got := withoutCC(tc.with, tc.cc); got != tc.without {
			t.Errorf("withoutCC(%q, %q) = %q, want %q", tc.with, tc.cc, got, tc.without)
		}
	}
}

func TestMeanBps(t *testing.T) {
	w := 250 * time.Millisecond
	s := []int64{100, 200, 300, 400, 500, 600, 700, 800}
	for _, tc := range []struct {
		from, to time.Duration
		want     float64
	}{
		{0, 2 * time.Second, 450 * 8 / 0.25},
		{time.Second, 2 * time.Second, 650 * 8 / 0.25},
		{300 * time.Millisecond, 1 * time.Second, 350 * 8 / 0.25}, // buckets 2 and 3 only
		{5 * time.Second, 6 * time.Second, 0},
	} {
		if got := MeanBps(s, w, tc.from, tc.to); got != tc.want {
			t.Errorf("MeanBps(%v, %v) = %g, want %g", tc.from, tc.to, got, tc.want)
		}
	}
}
