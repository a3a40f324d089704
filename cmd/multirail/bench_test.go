package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestBadFlagsRejected(t *testing.T) {
	cases := []struct {
		args []string
		want []string // substrings of the message
	}{
		{[]string{"bench", "--dispatch", "5ms"}, []string{"--dispatch 5ms", "10ms..1s"}},
		{[]string{"bench", "--dispatch", "2s"}, []string{"--dispatch 2s", "10ms..1s"}},
		{[]string{"bench", "--dispatch", "-10ms"}, []string{`--dispatch "-10ms"`, "negative", "10ms..1s"}},
		{[]string{"bench", "--dispatch", "0,soon"}, []string{`"soon"`}},
		{[]string{"bench", "--dispatch", ""}, []string{"--dispatch"}},
		{[]string{"bench", "--size", "1.5MiB"}, []string{`--size: units: size "1.5MiB"`, "allowed"}},
		{[]string{"bench", "--size", "2GiB"}, []string{`--size "2GiB" = 2147483648 bytes is out of range`}},
		{[]string{"bench", "--size", "-1k"}, []string{`--size "-1k" is out of range (negative): allowed 1..`}},
		{[]string{"bench", "--segment", "99999999999GiB"}, []string{`--segment "99999999999GiB" is out of range (too large`, "allowed 512..67108864 bytes"}},
		{[]string{"send", "--rails", "tcp:127.0.0.1>127.0.0.1", "--dispatch", "5ms"}, []string{"--dispatch 5ms", "10ms..1s"}},
		{[]string{"send", "--rails", "tcp:127.0.0.1>127.0.0.1", "--dispatch", "fast"}, []string{"fast"}},
		{[]string{"serve", "--dispatch", "2s"}, []string{"--dispatch 2s", "10ms..1s"}},
		{[]string{"bench", "--sched", "qlearn-patent", "--sched-opt", "k=40"}, []string{`--sched-opt "k=40"`, "K = 40, need 8..32"}},
		{[]string{"bench", "--sched", "qlearn", "--sched-opt", "beta"}, []string{`"beta": want key=value`}},
		{[]string{"bench", "--sched", "roundrobin", "--sched-opt", "k=16"}, []string{"none of the schedulers (roundrobin) takes options"}},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := run(append(c.args, "--json"), &stdout, &stderr)
		msg := stderr.String()
		if code != 2 {
			t.Errorf("%v: exit status %d, want 2 (stderr %q)", c.args, code, msg)
			continue
		}
		if strings.Count(msg, "\n") != 1 {
			t.Errorf("%v: want a one-line message, got %q", c.args, msg)
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%v: message %q does not mention %q", c.args, msg, w)
			}
		}
		if stdout.Len() != 0 {
			t.Errorf("%v: stdout %q, want nothing", c.args, stdout.String())
		}
	}
}

// contractKeys are the result fields scripts rely on (design.md).
var contractKeys = []string{"sched", "size", "goodput_bps", "capacity_bps", "efficiency", "rails", "latency_p50_s", "latency_p99_s"}

// TestBenchJSONDispatchAndLearning: --dispatch with two values gives one
// result per value, each with the contract fields plus the scheduler's
// decisions and recent choices.
func TestBenchJSONDispatchAndLearning(t *testing.T) {
	rep := runJSON(t, "bench", "--rails", "emu:100mbit,emu:50mbit", "--sched", "roundrobin", "--size", "64KiB",
		"--duration", "300ms", "--dispatch", "0,10ms", "--json", "-q")
	if len(rep.Results) != 2 {
		t.Fatalf("%d results, want 2 (one per dispatch interval)", len(rep.Results))
	}
	for i, want := range []float64{0, 0.01} {
		r := rep.Results[i]
		for _, k := range append(contractKeys, "dispatch_s", "decisions", "explorations", "recent_choices") {
			if _, ok := r[k]; !ok {
				t.Errorf("result %d lacks %q: %v", i, k, r)
			}
		}
		if r["dispatch_s"] != want {
			t.Errorf("result %d: dispatch_s %v, want %v", i, r["dispatch_s"], want)
		}
		if d, _ := r["decisions"].(float64); d <= 0 {
			t.Errorf("result %d: decisions %v", i, r["decisions"])
		}
		if rc, _ := r["recent_choices"].([]any); len(rc) == 0 || len(rc) > 64 {
			t.Errorf("result %d: recent_choices %v", i, r["recent_choices"])
		}
		rails, _ := r["rails"].([]any)
		if len(rails) != 2 {
			t.Fatalf("result %d: rails %v", i, r["rails"])
		}
		share := 0.0
		for _, x := range rails {
			rr := x.(map[string]any)
			for _, k := range []string{"name", "capacity_bps", "goodput_bps", "recent_share"} {
				if _, ok := rr[k]; !ok {
					t.Errorf("result %d: rail lacks %q: %v", i, k, rr)
				}
			}
			if _, ok := rr["level"]; ok {
				t.Errorf("result %d: roundrobin explains nothing, yet the rail has a level: %v", i, rr)
			}
			s, _ := rr["recent_share"].(float64)
			share += s
		}
		if share < 0.999 || share > 1.001 {
			t.Errorf("result %d: recent shares add up to %v", i, share)
		}
	}
}

// jsonResults is the part of a measuring command's JSON tests look at.
type jsonResults struct {
	Results []map[string]any `json:"results"`
}

// runJSON runs the CLI with args, which must succeed, and decodes the one
// JSON object it prints.
func runJSON(t *testing.T, args ...string) jsonResults {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, stderr.String())
	}
	var rep jsonResults
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	return rep
}
