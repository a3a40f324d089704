package lab

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The seeds in testdata are the output of Debian's iperf3 3.12 on this
// project's lab (rail0, 50 Mbit/s):
//
//	iperf3-server-2s.json: `iperf3 -s -1 -B 10.10.1.2 -p 5301 --json -i 0.25`
//	  while `iperf3 -c 10.10.1.2 -B 10.10.1.1 -p 5301 -t 2` ran;
//	iperf3-server-client-terminated.json: the same with the client
//	  (-t 5) ended by SIGTERM after about 1.1 s;
//	iperf3-server-address-in-use.json: the server on a port taken.
func readSeed(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseIperf(t *testing.T) {
	r, err := ParseIperf(readSeed(t, "iperf3-server-2s.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Version != "iperf 3.12" || r.Error != "" || len(r.Intervals) != 9 || r.ReceivedBytes != 12060152 || r.IntervalBytes() != r.ReceivedBytes {
		t.Errorf("2 s run: %+v (interval bytes %d)", r, r.IntervalBytes())
	}
	if iv := r.Intervals[0]; iv.Start != 0 || iv.End != 0.250017 || iv.Bytes != 1514608 {
		t.Errorf("first interval: %+v", iv)
	}
	if iv := r.Intervals[8]; iv.Start != 2.00009 || iv.End != 2.014424 || iv.Bytes != 83984 {
		t.Errorf("last interval (the tail after the client's 2 s): %+v", iv)
	}

	// The client ended early: iperf3 repeats the last interval and counts
	// what came after it only in the total.
	r, err = ParseIperf(readSeed(t, "iperf3-server-client-terminated.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Intervals) != 4 || r.Intervals[3].End != 1.000302 || r.Error != "the client has terminated" ||
		r.IntervalBytes() != 5976840 || r.ReceivedBytes != 6579208 {
		t.Errorf("client terminated: %+v (interval bytes %d)", r, r.IntervalBytes())
	}

	r, err = ParseIperf(readSeed(t, "iperf3-server-address-in-use.json"))
	if err != nil || !strings.Contains(r.Error, "Address already in use") || len(r.Intervals) != 0 || r.ReceivedBytes != 0 {
		t.Errorf("address in use: %+v, %v", r, err)
	}

	for _, bad := range []string{"", "  \n", "iperf3: error - unable to connect to server", `{"intervals": [{"sum": {"start": 1, "end": 0.5, "bytes": 3}}]}`,
		`{"intervals": [{"sum": {"start": 0, "end": 1, "bytes": -3}}]}`, `{"intervals": 3}`} {
		if r, err := ParseIperf([]byte(bad)); err == nil {
			t.Errorf("%q: no error: %+v", bad, r)
		}
	}
	// Omitted intervals (-O) are left out.
	r, err = ParseIperf([]byte(`{"intervals": [{"sum": {"start": 0, "end": 1, "bytes": 5, "omitted": true}}, {"sum": {"start": 0, "end": 1, "bytes": 7}}]}`))
	if err != nil || len(r.Intervals) != 1 || r.Intervals[0].Bytes != 7 {
		t.Errorf("omitted: %+v, %v", r, err)
	}
}

func TestSpreadIntervals(t *testing.T) {
	ms := time.Millisecond
	iv := func(s, e float64, b int64) IperfInterval { return IperfInterval{Start: s, End: e, Bytes: b} }
	for _, c := range []struct {
		name      string
		in        []IperfInterval
		offset    time.Duration
		limit     time.Duration
		n         int
		want      []int64
		widthOver time.Duration // width when not 250 ms
	}{
		{"aligned", []IperfInterval{iv(0, .25, 100), iv(.25, .5, 200)}, 0, 500 * ms, 2, []int64{100, 200}, 0},
		{"half a bucket late", []IperfInterval{iv(0, .25, 100), iv(.25, .5, 200)}, 125 * ms, 500 * ms, 2, []int64{50, 150}, 0},
		{"before bucket 0 is left out", []IperfInterval{iv(0, .25, 100)}, -125 * ms, 500 * ms, 2, []int64{50, 0}, 0},
		{"coarse intervals are spread", []IperfInterval{iv(0, 1, 400)}, 0, time.Second, 4, []int64{100, 100, 100, 100}, 0},
		{"cut at the limit", []IperfInterval{iv(0, 1, 400)}, 0, 600 * ms, 4, []int64{100, 100, 40, 0}, 0},
		{"beyond the buckets", []IperfInterval{iv(0, 2, 800)}, 0, 5 * time.Second, 2, []int64{100, 100}, 0},
		{"no time: at its start", []IperfInterval{iv(.25, .25, 9), iv(.1, .1, 1)}, 0, time.Second, 4, []int64{1, 9, 0, 0}, 0},
		{"no time at the limit: out", []IperfInterval{iv(.5, .5, 9)}, 0, 500 * ms, 4, []int64{0, 0, 0, 0}, 0},
		{"rounding keeps the sum", []IperfInterval{iv(0, .75, 10)}, 0, time.Second, 3, []int64{3, 4, 3}, 0},
		{"finer intervals add up", []IperfInterval{iv(0, .1, 10), iv(.1, .2, 10), iv(.2, .3, 10), iv(.3, .4, 10)}, 0, time.Second, 2, []int64{25, 15}, 0},
		{"other width", []IperfInterval{iv(0, 1, 1000)}, 0, time.Second, 2, []int64{500, 500}, 500 * ms},
		{"none", nil, 0, time.Second, 4, []int64{0, 0, 0, 0}, 0},
		{"no buckets", []IperfInterval{iv(0, 1, 1000)}, 0, time.Second, 0, []int64{}, 0},
	} {
		w := SeriesBucket
		if c.widthOver != 0 {
			w = c.widthOver
		}
		if got := SpreadIntervals(c.in, c.offset, w, c.limit, c.n); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestSpreadIntervalsKeepsBytes: intervals that lie within the buckets
// end up there, byte for byte, and never negative; the series of a
// report spread at any offset never holds more than the report.
func TestSpreadIntervalsKeepsBytes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 80).Draw(t, "buckets")
		width := time.Duration(rapid.IntRange(1, 1000).Draw(t, "width ms")) * time.Millisecond
		span := (time.Duration(n) * width).Seconds()
		var ivs []IperfInterval
		var total int64
		at := 0.0
		for range rapid.IntRange(0, 30).Draw(t, "intervals") {
			d := rapid.Float64Range(0, span/10).Draw(t, "length")
			if at+d >= span {
				break
			}
			b := rapid.Int64Range(0, 1<<30).Draw(t, "bytes")
			ivs = append(ivs, IperfInterval{Start: at, End: at + d, Bytes: b})
			total += b
			at += d
		}
		got := SpreadIntervals(ivs, 0, width, time.Duration(n)*width, n)
		var sum int64
		for _, v := range got {
			if v < 0 {
				t.Fatalf("negative bucket: %v", got)
			}
			sum += v
		}
		if sum != total {
			t.Fatalf("buckets hold %d bytes, intervals %d", sum, total)
		}
		offset := time.Duration(rapid.Int64Range(-int64(span*1e9), int64(span*1e9)).Draw(t, "offset"))
		limit := time.Duration(rapid.Int64Range(-1, int64(span*1e9)).Draw(t, "limit"))
		sum = 0
		for _, v := range SpreadIntervals(ivs, offset, width, limit, n) {
			if v < 0 {
				t.Fatalf("negative bucket at offset %v, limit %v", offset, limit)
			}
			sum += v
		}
		if sum > total {
			t.Fatalf("offset %v, limit %v: buckets hold %d bytes, more than the %d of the intervals", offset, limit, sum, total)
		}
	})
}

// TestSpreadSeed: the 2 s report in 250 ms buckets, counted from the
// server's start: 8 buckets of about 1.5 MB each, and the tail after 2 s
// left out.
func TestSpreadSeed(t *testing.T) {
	r, err := ParseIperf(readSeed(t, "iperf3-server-2s.json"))
	if err != nil {
		t.Fatal(err)
	}
	s := SpreadIntervals(r.Intervals, 0, SeriesBucket, 2*time.Second, 8)
	var sum int64
	for k, v := range s {
		if v < 1e6 || v > 2e6 {
			t.Errorf("bucket %d: %d bytes", k, v)
		}
		sum += v
	}
	// Everything but the 83984 bytes after 2.00009 s, and the 0.00009 s
	// of the interval before that lie past 2 s.
	if want := r.ReceivedBytes - 83984; sum > want || sum < want-1000 {
		t.Errorf("series holds %d bytes, want about %d", sum, want)
	}
}

func TestParseListeners(t *testing.T) {
	text := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0201010A:14B5 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 41531 1 000000009f01cb79 100 0 0 10 0
   1: 0201010A:14B5 0101010A:9FC7 01 00000000:00000000 03:00001547 00000000     0        0 41532 3 00000000c7c2d125
   2: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1531 1 000000009f01cb79 100 0 0 10 0
   3: 00000000000000000000000000000000:14B5 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 777 1
   4: short line
`
	if got := ParseListeners([]byte(text), 0x14B5); !slices.Equal(got, []uint64{41531, 777}) {
		t.Errorf("port 5301: %v", got)
	}
	if got := ParseListeners([]byte(text), 2024); !slices.Equal(got, []uint64{1531}) {
		t.Errorf("port 2024: %v", got)
	}
	if got := ParseListeners([]byte(text), 80); got != nil {
		t.Errorf("port 80: %v", got)
	}
}

func TestChooseTool(t *testing.T) {
	missing := fmt.Errorf("%w in PATH", ErrNoIperf3)
	for _, c := range []struct {
		asked      string
		avail      error
		tool, note string
		err        string
	}{
		{"", nil, ToolIperf3, "", ""},
		{"", missing, ToolGo, "the competing stream is the Go stream: lab: iperf3 not found in PATH", ""},
		{"iperf3", nil, ToolIperf3, "", ""},
		{"iperf3", missing, "", "", "lab: iperf3 not found in PATH"},
		{"go", missing, ToolGo, "", ""},
		{"go", nil, ToolGo, "", ""},
		{"netperf", nil, "", "", `lab: tool "netperf": allowed iperf3, go`},
	} {
		tool, note, err := ChooseTool(c.asked, c.avail)
		if tool != c.tool || note != c.note || fmt.Sprint(err) != map[bool]string{true: "<nil>", false: c.err}[c.err == ""] {
			t.Errorf("%q (iperf3 %v): %q, %q, %v; want %q, %q, %q", c.asked, c.avail, tool, note, err, c.tool, c.note, c.err)
		}
		if c.avail != nil && c.asked == "iperf3" && !errors.Is(err, ErrNoIperf3) {
			t.Errorf("%v does not wrap ErrNoIperf3", err)
		}
	}
}

// needIperfLab skips t unless it can build a lab and run iperf3 in it
// (root, iproute2, namespaces, iperf3). Under CI (CI=true) as root, where
// .ci/run installs them (scripts/lab-deps.sh), it fails instead.
func needIperfLab(t *testing.T) {
	t.Helper()
	if uid := os.Geteuid(); uid != 0 {
		t.Skipf("an iperf3 stream in a lab needs root (network namespaces, tc, sysctl); running as uid %d", uid)
	}
	unavailable := t.Skipf
	if os.Getenv("CI") == "true" {
		unavailable = t.Fatalf
	}
	if err := Available(); err != nil {
		unavailable("%v", err)
	}
	if err := Iperf3Available(); err != nil {
		unavailable("%v", err)
	}
}

// noProcesses checks that nothing runs in the lab's namespaces.
func noProcesses(t *testing.T, l *Lab, when string) {
	t.Helper()
	for side := 0; side < 2; side++ {
		if pids, err := NSPids(l.NS(side)); err != nil || len(pids) > 0 {
			t.Errorf("%s: processes in %s: %v, %v", when, l.NS(side), pids, err)
		}
	}
}

// TestIperfLoadIntegration runs iperf3 streams over the rails of a small
// lab: their goodput is close to the rails' TCP ceilings and their series
// have a bucket per 250 ms; a stream stopped early or cancelled before it
// began leaves no process behind; a rail that is down is an error.
func TestIperfLoadIntegration(t *testing.T) {
	needIperfLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rates := []float64{50e6, 20e6}
	cfg := testConfig(t, rates...)
	cfg.Prefix = fmt.Sprintf("ip3%05x", rand.IntN(1<<20))
	l, err := Up(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Down()

	// Both rails at once; rail1's duration is not whole seconds.
	durs := []time.Duration{2 * time.Second, 1250 * time.Millisecond}
	var (
		wg   sync.WaitGroup
		res  [2]LoadResult
		errs [2]error
	)
	var begin, setup [2]time.Time
	for rail, d := range durs {
		begin[rail] = time.Now()
		s, err := l.LoadWith(ctx, ToolIperf3, rail, 300*time.Millisecond, d)
		if err != nil {
			t.Fatal(err)
		}
		setup[rail] = time.Now()
		wg.Add(1)
		go func() { defer wg.Done(); res[rail], errs[rail] = s.Wait() }()
	}
	wg.Wait()
	for rail, r := range res {
		if errs[rail] != nil {
			t.Fatalf("rail %d: %v", rail, errs[rail])
		}
		ceiling := GoodputCeiling(rates[rail])
		var sum int64
		for _, v := range r.Series {
			sum += v
		}
		t.Logf("rail %d: iperf3 %.2f Mbit/s over %v = %.3f of the TCP ceiling %.2f; series %v", rail, r.GoodputBps/1e6, r.Duration, r.GoodputBps/ceiling, ceiling/1e6, r.Series)
		if r.Rail != rail || r.Duration != durs[rail] || r.Bucket != SeriesBucket || sum != r.Bytes {
			t.Errorf("rail %d: %+v (series holds %d bytes)", rail, r, sum)
		}
		if want := int((durs[rail] + SeriesBucket - 1) / SeriesBucket); len(r.Series) != want {
			t.Errorf("rail %d: %d buckets, want %d", rail, len(r.Series), want)
		}
		if r.Start.Before(begin[rail].Add(300*time.Millisecond)) || r.Start.After(setup[rail].Add(300*time.Millisecond)) {
			t.Errorf("rail %d: starts %v after the call began, which took %v; want 300 ms after it returned", rail, r.Start.Sub(begin[rail]), setup[rail].Sub(begin[rail]))
		}
		if r.GoodputBps < 0.7*ceiling || r.GoodputBps > 1.05*ceiling {
			t.Errorf("rail %d: goodput %.2f Mbit/s = %.3f of the TCP ceiling %.2f, want 0.7..1.05", rail, r.GoodputBps/1e6, r.GoodputBps/ceiling, ceiling/1e6)
		}
	}
	noProcesses(t, l, "after the streams")

	// Stopped early: what came so far, and both processes gone.
	s, err := l.LoadIperf(ctx, 0, 0, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	r, err := s.Stop()
	ceiling := GoodputCeiling(rates[0])
	t.Logf("stopped after %v: %.2f Mbit/s, %d bytes", r.Duration, r.GoodputBps/1e6, r.Bytes)
	if err != nil || r.Duration < 900*time.Millisecond || r.Duration > 1200*time.Millisecond || r.GoodputBps < 0.7*ceiling || r.GoodputBps > 1.05*ceiling || len(r.Series) != 12 {
		t.Errorf("stopped: %+v, %v", r, err)
	}
	noProcesses(t, l, "after Stop")

	// Cancelled before it began.
	cctx, ccancel := context.WithCancel(ctx)
	s, err = l.LoadIperf(cctx, 0, 10*time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ccancel()
	t0 := time.Now()
	r, err = s.Wait()
	if err != nil || r.Bytes != 0 || r.Duration != 0 || time.Since(t0) > 3*time.Second {
		t.Errorf("cancelled before the start: %+v, %v after %v", r, err, time.Since(t0))
	}
	noProcesses(t, l, "after the cancel")

	// A rail that is down is an error at once.
	if err := l.SetLink(1, false); err != nil {
		t.Fatal(err)
	}
	if s, err := l.LoadIperf(ctx, 1, 0, time.Second); err == nil {
		s.Stop()
		t.Error("an iperf3 stream started over rail1 while it is down")
	} else if !strings.Contains(err.Error(), "rail 1") {
		t.Errorf("rail down: %v", err)
	}
	noProcesses(t, l, "after the rail that is down")
	if err := l.Down(); err != nil {
		t.Fatal(err)
	}
	gone(t, cfg.Prefix)
}

func TestIperfIntervalEnd(t *testing.T) {
	for _, c := range []struct {
		line string
		end  float64
		ok   bool
	}{
		{"[  5]   0.00-0.25   sec  1.83 MBytes  61.3 Mbits/sec    0    139 KBytes       ", 0.25, true},
		{"[  5]   1.75-2.00   sec  1.49 MBytes  50.0 Mbits/sec    0    117 KBytes", 2, true},
		{"[  5]   0.00-2.01   sec  11.5 MBytes  47.9 Mbits/sec                  receiver", 2.01, true},
		{"[SUM]   0.00-1.00   sec  6.11 MBytes  51.2 Mbits/sec    5", 1, true},
		{"[  5] local 10.10.1.1 port 39581 connected to 10.10.1.2 port 5301", 0, false},
		{"[ ID] Interval           Transfer     Bitrate         Retr  Cwnd", 0, false},
		{"Connecting to host 10.10.1.2, port 5301", 0, false},
		{"- - - - - - - - - - - - - - - - - - - - - - - - -", 0, false},
		{"[  5]   0.00-0.00   sec  0.00 Bytes  0.00 bits/sec", 0, false},
	} {
		if end, ok := iperfIntervalEnd(c.line); end != c.end || ok != c.ok {
			t.Errorf("%q: %v, %v; want %v, %v", c.line, end, ok, c.end, c.ok)
		}
	}
}
