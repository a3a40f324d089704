package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/multirail/multirail/sched"
)

// checkDemoReport checks a demo report object against the schedulers.
func checkDemoReport(t *testing.T, what string, rep demoReport, dir string) {
	t.Helper()
	if rep.Out != dir {
		t.Errorf("%s: out = %q, want %q", what, rep.Out, dir)
	}
	names := sched.Names()
	if len(rep.Results) != len(names) {
		t.Fatalf("%s: %d results, want one per scheduler %v", what, len(rep.Results), names)
	}
	for i, r := range rep.Results {
		if r.Sched != names[i] {
			t.Errorf("%s: result %d is %q, want %q", what, i, r.Sched, names[i])
		}
		if !(r.GoodputBps > 0) || !(r.CapacityBps > 0) || len(r.Rails) != 3 {
			t.Errorf("%s: %s: goodput %v, capacity %v, %d rails; want > 0, > 0, 3", what, r.Sched, r.GoodputBps, r.CapacityBps, len(r.Rails))
		}
	}
	if !(rep.Baseline.GoodputBps > 0) {
		t.Errorf("%s: baseline goodput %v, want > 0", what, rep.Baseline.GoodputBps)
	}
	if len(rep.Timelines) != len(names) {
		t.Fatalf("%s: %d timelines, want %d", what, len(rep.Timelines), len(names))
	}
	for _, tl := range rep.Timelines {
		if len(tl.T) == 0 || len(tl.RailsBps) != 3 || len(tl.RailsBps[0]) != len(tl.T) {
			t.Errorf("%s: timeline %s: %d bins, %d rails", what, tl.Sched, len(tl.T), len(tl.RailsBps))
		}
	}
}

func TestDemoWritesReport(t *testing.T) {
	names := sched.Names()
	t.Run("report", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "x")
		var stdout, stderr bytes.Buffer
		if code := run([]string{"demo", "--duration", "1s", "--quiet", "--out", dir}, &stdout, &stderr); code != 0 {
			t.Fatalf("exit status %d, stderr:\n%s", code, stderr.String())
		}
		out := stdout.String()
		if !strings.HasSuffix(out, "report written to "+dir+"\n") {
			t.Errorf("stdout does not end with %q:\n%s", "report written to "+dir, out)
		}
		for _, n := range append(slices.Clone(names), "plain TCP") {
			if !strings.Contains(out, n) {
				t.Errorf("stdout table lacks %q:\n%s", n, out)
			}
		}
		data, err := os.ReadFile(filepath.Join(dir, "results.json"))
		if err != nil {
			t.Fatal(err)
		}
		var rep demoReport
		if err := json.Unmarshal(data, &rep); err != nil {
			t.Fatalf("results.json: %v", err)
		}
		checkDemoReport(t, "results.json", rep, dir)
		for _, f := range []string{"goodput.png", "summary.png"} {
			fh, err := os.Open(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(fh)
			fh.Close()
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if b := img.Bounds(); b.Dx() < 200 || b.Dy() < 200 {
				t.Errorf("%s is %v, want a readable size", f, b)
			}
		}
		md, err := os.ReadFile(filepath.Join(dir, "summary.md"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range append(slices.Clone(names), "goodput.png", "summary.png", "Plain TCP", "| scheduler |") {
			if !strings.Contains(string(md), want) {
				t.Errorf("summary.md lacks %q", want)
			}
		}
	})
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "y")
		var stdout, stderr bytes.Buffer
		if code := run([]string{"demo", "--duration", "1s", "--quiet", "--json", "--out", dir}, &stdout, &stderr); code != 0 {
			t.Fatalf("exit status %d, stderr:\n%s", code, stderr.String())
		}
		// Exactly one JSON object on stdout, the same as results.json.
		dec := json.NewDecoder(&stdout)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("stdout is not JSON: %v", err)
		}
		if dec.More() {
			t.Errorf("more than one JSON value on stdout")
		}
		file, err := os.ReadFile(filepath.Join(dir, "results.json"))
		if err != nil {
			t.Fatal(err)
		}
		var a, b demoReport
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(file, &b); err != nil {
			t.Fatal(err)
		}
		checkDemoReport(t, "stdout", a, dir)
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if !bytes.Equal(ja, jb) {
			t.Errorf("--json output differs from results.json")
		}
	})
}

func TestDemoBadFlags(t *testing.T) {
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "keep.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "plain-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want []string // substrings of the message
	}{
		{[]string{"--duration", "0s"}, []string{"--duration 0s", "1s..10m0s"}},
		{[]string{"--duration", "20m"}, []string{"--duration 20m0s", "1s..10m0s"}},
		{[]string{"--duration", "-3s"}, []string{"--duration -3s", "1s..10m0s"}},
		{[]string{"--duration", "soon"}, []string{"soon"}},
		{[]string{"--out", full}, []string{full, "not empty"}},
		{[]string{"--out", file}, []string{file, "not a folder"}},
		{[]string{"extra"}, []string{"extra"}},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		args := append([]string{"demo", "--quiet"}, c.args...)
		code := run(args, &stdout, &stderr)
		msg := stderr.String()
		if code != 2 {
			t.Errorf("%v: exit status %d, want 2 (stderr %q)", c.args, code, msg)
			continue
		}
		if strings.Count(msg, "\n") != 1 || !strings.HasSuffix(msg, "\n") {
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
	ents, err := os.ReadDir(full)
	if err != nil || len(ents) != 1 {
		t.Errorf("non-empty --out folder was touched: %v entries, %v", len(ents), err)
	}
}
