package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/multirail/multirail/sched"
	"github.com/multirail/multirail/sim"
)

func TestSimJSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"sim", "--scenario", "static-hetero", "--json", "--duration", "1s", "-q"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit status %d, stderr:\n%s", code, stderr.String())
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr with -q: %s", stderr.String())
	}
	dec := json.NewDecoder(&stdout)
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		t.Fatalf("stdout is not JSON: %v", err)
	}
	if dec.More() {
		t.Error("stdout holds more than one JSON value")
	}
	if raw["scenario"] != "static-hetero" {
		t.Errorf("scenario = %v", raw["scenario"])
	}
	results, _ := raw["results"].([]any)
	names := sched.Names()
	if len(results) != len(names) {
		t.Fatalf("%d results, want one per scheduler %v", len(results), names)
	}
	for i, x := range results {
		r, _ := x.(map[string]any)
		if r["sched"] != names[i] {
			t.Errorf("result %d: sched %v, want %s", i, r["sched"], names[i])
		}
		for _, k := range []string{"goodput_bps", "mean_completion_s", "p99_completion_s", "capacity_bps", "efficiency", "events"} {
			if v, ok := r[k].(float64); !ok || !(v > 0) {
				t.Errorf("%s: %s = %v, want a number > 0", names[i], k, r[k])
			}
		}
		if d := r["duration_s"]; d != 1.0 {
			t.Errorf("%s: duration_s = %v, want 1", names[i], d)
		}
		rails, _ := r["rails"].([]any)
		if len(rails) != 3 {
			t.Errorf("%s: %d rails, want 3", names[i], len(rails))
		}
	}
}

func TestSimTableAndOut(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plots")
	var stdout, stderr bytes.Buffer
	code := run([]string{"sim", "--scenario", "step-shift", "--sched", "shortestqueue,roundrobin", "--duration", "2s", "--seed", "5", "--out", dir}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit status %d, stderr:\n%s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"scenario step-shift (seed 5)", "shortestqueue", "roundrobin", "goodput Mbit/s", "share % (a/b/c)"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "weighted") {
		t.Errorf("table has a scheduler not asked for:\n%s", out)
	}
	if !strings.Contains(stderr.String(), "done") {
		t.Errorf("no progress on stderr: %q", stderr.String())
	}
	for _, f := range []string{"share.png", "completion_cdf.png"} {
		fh, err := os.Open(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := png.Decode(fh); err != nil {
			t.Errorf("%s: %v", f, err)
		}
		fh.Close()
	}
	var rep simReport
	data, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err == nil {
		err = json.Unmarshal(data, &rep)
	}
	if err != nil || len(rep.Results) != 2 || rep.Seed != 5 {
		t.Errorf("results.json: %v, %+v", err, rep)
	}
}

func TestSimScenarioFile(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"sim", "--scenario", filepath.Join("..", "..", "sim", "testdata", "example.yaml"), "--json", "--duration", "500ms", "--sched", "weighted", "-q"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit status %d, stderr:\n%s", code, stderr.String())
	}
	var rep simReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil || rep.Scenario != "example" || len(rep.Results) != 1 || rep.Seed != 42 {
		t.Fatalf("output %v: %s", err, stdout.String())
	}
}

func TestSimList(t *testing.T) {
	for _, args := range [][]string{{"sim", "--list"}, {"sim", "--scenario", "list"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 0 {
			t.Fatalf("%v: exit status %d, stderr:\n%s", args, code, stderr.String())
		}
		for _, n := range sim.BuiltinNames() {
			if !strings.Contains(stdout.String(), n) {
				t.Errorf("%v: list lacks %s:\n%s", args, n, stdout.String())
			}
		}
	}
}

func TestSimBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("duration: 1s\nrails:\n  - {rate: 200mbt}\ntraffic: {kind: bulk}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sim"}, "--scenario is required"},
		{[]string{"sim", "--scenario", "nosuch"}, `--scenario "nosuch": no built-in scenario and no file of that name (built-ins: allreduce-1024`},
		{[]string{"sim", "--scenario", bad}, bad + `:3: rails[0].rate: units: rate "200mbt": unknown unit "mbt"`},
		{[]string{"sim", "--scenario", "static-hetero", "--sched", "bogus"}, `--sched "bogus": unknown scheduler "bogus" (allowed: `},
		{[]string{"sim", "--scenario", "static-hetero", "--sched", "weighted,weighted"}, `"weighted" is listed twice`},
		{[]string{"sim", "--scenario", "static-hetero", "--duration", "-1s"}, `--duration "-1s": want a duration > 0`},
		{[]string{"sim", "--scenario", "static-hetero", "--duration", "ten"}, `--duration "ten"`},
		{[]string{"sim", "--scenario", "static-hetero", "--seed", "x"}, `--seed "x": want an integer`},
		{[]string{"sim", "--scenario", "static-hetero", "--dispatch", "1ms"}, `--dispatch "1ms": allowed 0 (continuous) or 10ms..1s`},
		{[]string{"sim", "--scenario", "static-hetero", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"sim", "--scenario", "static-hetero", "extra"}, `sim takes no arguments, got "extra"`},
	} {
		var stdout, stderr bytes.Buffer
		code := run(c.args, &stdout, &stderr)
		if code != 2 {
			t.Errorf("%v: exit status %d, want 2 (stderr %q)", c.args, code, stderr.String())
		}
		msg := stderr.String()
		if !strings.Contains(msg, c.want) || strings.Count(msg, "\n") != 1 {
			t.Errorf("%v: stderr %q, want one line containing %q", c.args, msg, c.want)
		}
		if stdout.Len() != 0 {
			t.Errorf("%v: stdout %q", c.args, stdout.String())
		}
	}
}
