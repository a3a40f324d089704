package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/comm"
	"github.com/multirail/multirail/emu"
)

// sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape GETs url with a real HTTP client and parses the text format.
func scrape(t *testing.T, url string) []sample {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	var out []sample
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		s := sample{name: line[:sp], labels: map[string]string{}, value: v}
		if i := strings.IndexByte(s.name, '{'); i >= 0 {
			for _, kv := range strings.Split(strings.TrimSuffix(s.name[i+1:], "}"), ",") {
				k, v, _ := strings.Cut(kv, "=")
				s.labels[k] = strings.Trim(v, `"`)
			}
			s.name = s.name[:i]
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// value returns the sample of name with the given peer and rail ("" for
// none), and whether there is one.
func value(ss []sample, name, peer, rail string) (float64, bool) {
	for _, s := range ss {
		if s.name == name && s.labels["peer"] == peer && s.labels["rail"] == rail {
			return s.value, true
		}
	}
	return 0, false
}

// TestMetricsScrape serves the metrics of a live two-rail connection and
// scrapes them with a real HTTP client while traffic flows: the byte
// counters move on both rails, the rail labels are the connection's rail
// names, and a rail whose link goes down shows multirail_rail_up 0.
func TestMetricsScrape(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const tok = "metrics-test-token-0123456789abcdef"
	cfg := multirail.Config{Token: tok, RailTimeout: 100 * time.Millisecond, IdleTimeout: 10 * time.Minute}
	ln, err := multirail.Listen("127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var links []*emu.Link
	dcfg := cfg
	for i := range 2 {
		l, err := emu.NewLink(ln.Addr().String(), emu.LinkConfig{RateBps: 200e6})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		links = append(links, l)
		dcfg.Rails = append(dcfg.Rails, multirail.Rail{Name: fmt.Sprintf("emu%d", i), Addr: l.Addr(), Bandwidth: 200e6})
	}
	accepted := make(chan *multirail.Conn, 1)
	go func() {
		c, err := ln.Accept(ctx)
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	a, err := multirail.Dial(ctx, dcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := <-accepted
	if b == nil {
		t.FailNow()
	}
	defer b.Close()

	var conns metricsConns
	defer conns.add(a, "sender")()
	defer conns.add(b, "receiver")()
	ms, err := startMetrics("127.0.0.1:0", &conns, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	url := "http://" + ms.addr + "/metrics"

	// The receiver drains whatever comes.
	go func() {
		for {
			m, err := b.Recv(ctx)
			if err != nil {
				return
			}
			b.Release(m.Data)
		}
	}()
	// Eight senders at once, so that queues form and the scheduler
	// spreads the segments (one message at a time goes to the fastest
	// idle rail only).
	send := func(n int) {
		t.Helper()
		msg := make([]byte, 64<<10)
		errs := make(chan error, 8)
		for w := range 8 {
			go func() {
				var err error
				for i := w; i < n && err == nil; i += 8 {
					err = a.Send(ctx, 1, msg)
				}
				errs <- err
			}()
		}
		for range 8 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
	send(20)
	before := scrape(t, url)
	for _, r := range []string{"emu0", "emu1"} {
		if v, ok := value(before, "multirail_rail_up", "sender", r); !ok || v != 1 {
			t.Fatalf("multirail_rail_up{peer=sender,rail=%s} = %v, %v; want 1", r, v, ok)
		}
	}
	// Every rail label is one of that peer's connection's rail names (the
	// accepting side names its rails by their remote addresses).
	names := map[string]map[string]bool{}
	for peer, c := range map[string]*multirail.Conn{"sender": a, "receiver": b} {
		names[peer] = map[string]bool{}
		for _, r := range c.Stats().Rails {
			names[peer][r.Name] = true
		}
	}
	railSeries := 0
	for _, s := range before {
		if r, ok := s.labels["rail"]; ok {
			railSeries++
			if !names[s.labels["peer"]][r] {
				t.Fatalf("%s{peer=%q} has rail label %q; that connection's rails are %v", s.name, s.labels["peer"], r, names[s.labels["peer"]])
			}
		}
	}
	if railSeries < 4 {
		t.Fatalf("%d per-rail series, want every rail of both connections", railSeries)
	}
	send(200)
	after := scrape(t, url)
	for _, r := range []string{"emu0", "emu1"} {
		v0, _ := value(before, "multirail_rail_sent_bytes_total", "sender", r)
		v1, ok := value(after, "multirail_rail_sent_bytes_total", "sender", r)
		if !ok || v1 <= v0 {
			t.Errorf("rail %s: sent bytes %v then %v while 200 messages of 64 KiB went", r, v0, v1)
		}
	}
	var got, sent float64
	for _, s := range after {
		if s.name == "multirail_rail_received_bytes_total" && s.labels["peer"] == "receiver" {
			got += s.value
		}
	}
	if sent = 220 * 64 << 10; got < sent*0.5 {
		t.Errorf("receiver counted %v payload bytes of %v sent", got, sent)
	}
	if v, ok := value(after, "multirail_messages_sent_total", "sender", ""); !ok || v != 220 {
		t.Errorf("multirail_messages_sent_total{peer=sender} = %v, %v; want 220", v, ok)
	}

	// Take rail 1's link down while traffic flows: the rail is declared
	// stalled and /metrics says so.
	links[1].SetDown(true)
	deadline := time.Now().Add(30 * time.Second)
	for {
		send(5)
		if v, ok := value(scrape(t, url), "multirail_rail_up", "sender", "emu1"); ok && v == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("multirail_rail_up{rail=emu1} never went to 0; stats %+v", a.Stats().Rails)
		}
	}
	final := scrape(t, url)
	if v, _ := value(final, "multirail_rail_up", "sender", "emu0"); v != 1 {
		t.Errorf("the healthy rail emu0 shows up %v", v)
	}
	stalls := -1.0
	for _, s := range final {
		if s.name == "multirail_rail_errors_total" && s.labels["peer"] == "sender" && s.labels["rail"] == "emu1" && s.labels["reason"] == "stalled" {
			stalls = s.value
		}
	}
	if stalls < 1 {
		t.Errorf("multirail_rail_errors_total{rail=emu1,reason=stalled} = %v; want the stall counted", stalls)
	}
	links[1].SetDown(false)
}

func TestMetricsFlag(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--metrics", "nowhere"},
		{"serve", "--metrics", "9100"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(args, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), "--metrics") || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line naming --metrics", args, code, stderr.String())
		}
	}
}

// TestGrafanaDashboard: docs/grafana-dashboard.json parses, and every
// metric its queries name is one that /metrics serves.
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile("../../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("docs/grafana-dashboard.json: %v", err)
	}
	exists := map[string]bool{}
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, d := range connDescs {
		m := fq.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no name in %s", d)
		}
		exists[m[1]] = true
	}
	mfs, err := newMetricsRegistry(&metricsConns{}).Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		exists[mf.GetName()] = true
	}
	var exprs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "expr" || k == "query" || k == "definition") {
					exprs = append(exprs, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(dash)
	if len(exprs) < 10 {
		t.Fatalf("%d queries in the dashboard", len(exprs))
	}
	name := regexp.MustCompile(`\b(?:multirail|go|process)_[a-z_]+`)
	named := 0
	for _, e := range exprs {
		for _, n := range name.FindAllString(e, -1) {
			named++
			if !exists[n] {
				t.Errorf("the dashboard queries %s (in %q), which /metrics does not serve", n, e)
			}
		}
	}
	if panels, _ := dash["panels"].([]any); len(panels) == 0 || named == 0 {
		t.Fatalf("%d panels, %d metric names", len(panels), named)
	}
}

// TestCommMetrics: a communicator's metrics, scraped over HTTP: every peer
// connection under its rank, and the collectives by operation and
// algorithm with their calls and time.
func TestCommMetrics(t *testing.T) {
	t.Setenv("MULTIRAIL_TOKEN", multirail.NewToken())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := comm.NewLocal(ctx, 3, comm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	var conns metricsConns
	conns.addComm(cs[0])
	ms, err := startMetrics("127.0.0.1:0", &conns, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	errs := make(chan error, len(cs))
	for _, c := range cs {
		go func() {
			buf := make([]float64, 1<<16)
			var err error
			for range 3 {
				if err = comm.Allreduce(ctx, c, buf, comm.Sum); err != nil {
					break
				}
			}
			errs <- err
		}()
	}
	for range cs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	peers := map[string]bool{}
	var calls, seconds float64
	for _, s := range scrape(t, "http://"+ms.addr+"/metrics") {
		switch s.name {
		case "multirail_rail_sent_bytes_total":
			if s.value > 0 {
				peers[s.labels["peer"]] = true
			}
		case "multirail_collective_calls_total":
			if s.labels["op"] == "allreduce" {
				calls += s.value
			}
		case "multirail_collective_seconds_total":
			if s.labels["op"] == "allreduce" && s.labels["algo"] != "" {
				seconds += s.value
			}
		}
	}
	if !peers["1"] || !peers["2"] || peers["0"] {
		t.Errorf("peers with bytes sent: %v; want ranks 1 and 2", peers)
	}
	if calls != 3 || seconds <= 0 {
		t.Errorf("allreduce calls %v, seconds %v; want 3 calls and some time", calls, seconds)
	}
}

func TestRankMetricsAddr(t *testing.T) {
	for _, tc := range []struct {
		addr  string
		local int
		want  string
	}{
		{":9300", 0, ":9300"}, {":9300", 3, ":9303"}, {"10.0.0.1:9300", 1, "10.0.0.1:9301"}, {"127.0.0.1:0", 0, "127.0.0.1:0"},
		{"9300", 0, ""}, {":65535", 1, ""}, {":0", 1, ""}, {":x", 0, ""},
	} {
		got, err := rankMetricsAddr(tc.addr, tc.local)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("rankMetricsAddr(%q, %d) = %q, %v; want %q", tc.addr, tc.local, got, err, tc.want)
		}
	}
}
