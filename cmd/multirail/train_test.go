package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTrainBadFlags(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"train", "--mode", "fast"}, []string{`--mode "fast"`, "reliable, losstolerant or both"}},
		{[]string{"train", "--workers", "1"}, []string{"--workers 1", "2..16"}},
		{[]string{"train", "--steps", "0"}, []string{"--steps 0", "1..100000"}},
		{[]string{"train", "--lr", "-1"}, []string{"--lr -1", "(0, 10]"}},
		{[]string{"train", "--target", "1.2"}, []string{"--target 1.2", "(0, 1)"}},
		{[]string{"train", "--hidden", "0"}, []string{`--hidden "0"`, "1..4096"}},
		{[]string{"train", "--rails", "emu:fast"}, []string{`--rails "emu:fast"`}},
		{[]string{"train", "--rails", "loop"}, []string{"not an emulated rail"}},
		{[]string{"train", "--congestion", "heavy"}, []string{`--congestion "heavy"`, "bursty, phases or off"}},
		{[]string{"train", "--load", "0.9:0.5"}, []string{`--load "0.9:0.5"`, "0 < MIN <= MAX < 1"}},
		{[]string{"train", "--discard-opt", "k=1"}, []string{`--discard-opt "k=1"`, "History = 1", "allowed"}},
		{[]string{"train", "--discard-opt", "max=1"}, []string{"Max = 1", "allowed"}},
		{[]string{"train", "--discard-opt", "th2=-0.1"}, []string{"DelayThreshold = -0.1"}},
		{[]string{"train", "--discard-opt", "initial=0.9"}, []string{"Initial = 0.9"}},
		{[]string{"train", "--packet-floats", "5000"}, []string{"--packet-floats 5000", "1..4000"}},
		{[]string{"train", "--seed", "-3"}, []string{`--seed "-3"`}},
		{[]string{"train", "--sync-every", "0"}, []string{"--sync-every 0", "-1 for never"}},
		{[]string{"train", "--partition", "shards:0"}, []string{`--partition "shards:0"`, "dirichlet:ALPHA"}},
		{[]string{"train", "--discard-rate", "1"}, []string{"--discard-rate 1", "[0, 1)"}},
		{[]string{"train", "--congestion", "phases", "--calm", "0s"}, []string{"--calm 0s", "1ms..1h"}},
		{[]string{"train", "--phase-rates", "0.05"}, []string{`--phase-rates "0.05"`, "CALM:CONGESTED"}},
		{[]string{"train", "--phase-rates", "0:0.5"}, []string{`--phase-rates "0:0.5"`, "(0, 1)"}},
		{[]string{"train", "--phase-rates", "0.05:0.6"}, []string{`--phase-rates "0.05:0.6"`, "needs --congestion phases"}},
		{[]string{"train", "--allreduce", "tree"}, []string{`--allreduce "tree"`, "transpose or ring"}},
		{[]string{"train", "--step-time", "fast"}, []string{`--step-time "fast"`, "0..10s"}},
		{[]string{"train", "--step-time", "11s"}, []string{`--step-time "11s"`, "0..10s"}},
		{[]string{"train", "--targets", "0.9,1"}, []string{`--targets "0.9,1"`, "(0, 1)"}},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := run(append(c.args, "--json"), &stdout, &stderr)
		msg := stderr.String()
		if code != 2 || strings.Count(msg, "\n") != 1 || stdout.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit 2 and one line", c.args, code, msg, stdout.String())
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%v: message %q does not mention %q", c.args, msg, w)
			}
		}
	}
}

// TestTrainJSON: a short run prints the contract's fields for both modes
// and writes the plots.
func TestTrainJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("trains two models")
	}
	dir := t.TempDir()
	rep := runJSON(t, "train", "--workers", "2", "--steps", "12", "--eval-every", "6", "--rails", "emu:400mbit",
		"--json", "-q", "--out", dir)
	if len(rep.Results) != 2 {
		t.Fatalf("%d results", len(rep.Results))
	}
	for i, mode := range []string{"reliable", "losstolerant"} {
		r := rep.Results[i]
		for _, k := range []string{"mode", "final_accuracy", "time_to_target_s", "target_accuracy", "targets", "steps", "mean_discard_rate"} {
			if _, ok := r[k]; !ok {
				t.Fatalf("%s result without %q: %v", mode, k, r)
			}
		}
		if r["mode"] != mode || r["steps"] != float64(12) || r["target_accuracy"] != 0.9 {
			t.Fatalf("result %d: %v", i, r)
		}
	}
	for _, f := range []string{"accuracy.png", "discard.png", "results.json"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s not written: %v", f, err)
		}
	}
}
