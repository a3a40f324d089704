package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestTrainSuiteBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--scenarios", "calm,storm"}, `unknown "storm"`},
		{[]string{"--seeds", "5-1"}, `--seeds "5-1"`},
		{[]string{"--seeds", "a"}, `--seeds "a"`},
		{[]string{"--rates", "0,1"}, "each in [0, 1)"},
		{[]string{"--settings", "best"}, `unknown "best"`},
		{[]string{"--oracle", "0:0.5"}, "CALM:CONGESTED"},
		{[]string{"--targets", "0.9,2"}, "each in (0, 1)"},
		{[]string{"--boot", "5"}, "100..100000"},
		{[]string{"--step-time", "-1s"}, "--step-time"},
		{[]string{"--partition", "halves"}, "--partition"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"train", "suite"}, c.args...), &stdout, &stderr)
		msg := stderr.String()
		if code != 2 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, c.want) || stdout.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line naming %q", c.args, code, msg, c.want)
		}
	}
}

// TestTrainSuiteSmoke runs a small suite end to end (multirail run jobs
// of 2 processes over emulated rails, one phased scenario, 2 seeds, two
// fixed rates, the default controller, the oracle and the reliable mode), checks the
// report, then runs it again on the same --out: every run is kept, none
// is run again, and the analysis is the same.
func TestTrainSuiteSmoke(t *testing.T) {
	bin := multirailBinary(t)
	out := t.TempDir()
	args := []string{"train", "suite", "--scenarios", "short-phases", "--seeds", "1-2", "--rates", "0,0.4", "--settings", "default,oracle,reliable",
		"--steps", "12", "--workers", "2", "--step-time", "5ms", "--partition", "iid", "--targets", "0.3,0.5", "--boot", "200", "--out", out, "--json"}
	runSuite := func() (suiteReport, string) {
		cmd := exec.Command(bin, args...)
		cmd.Env = cleanEnv()
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("train suite: %v\n%s", err, stderr.String())
		}
		var rep suiteReport
		if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
			t.Fatalf("JSON: %v\n%s", err, stdout.String())
		}
		return rep, stderr.String()
	}
	rep, _ := runSuite()
	if len(rep.Runs) != 10 || rep.Analysis == nil {
		t.Fatalf("%d runs, analysis %v", len(rep.Runs), rep.Analysis)
	}
	an := rep.Analysis
	if len(an.Cells) != 2*5 || len(an.Verdicts) != 2 || an.Verdicts[1].Setting != "default" || an.Verdicts[1].BestFixed == "" {
		t.Fatalf("analysis: %d cells, verdicts %+v", len(an.Cells), an.Verdicts)
	}
	for _, r := range rep.Runs {
		if len(r.Result.Targets) != 2 || r.Result.Steps != 12 {
			t.Fatalf("run %+v", r)
		}
		switch r.Setting {
		case "fixed:0":
			if r.Result.Mode != "losstolerant" || r.Result.MeanDiscardRate > 0.001 {
				t.Fatalf("fixed:0 ran %s discarding %v", r.Result.Mode, r.Result.MeanDiscardRate)
			}
		case "reliable":
			if r.Result.Mode != "reliable" || r.Result.MeanDiscardRate != 0 {
				t.Fatalf("reliable ran %s discarding %v", r.Result.Mode, r.Result.MeanDiscardRate)
			}
		case "fixed:0.4":
			if r.Result.MeanDiscardRate < 0.3 || r.Result.MeanDiscardRate > 0.5 {
				t.Fatalf("fixed:0.4 discarded %v", r.Result.MeanDiscardRate)
			}
		case "oracle":
			// Each rank pins by its own clock and a step counts in the
			// phase rank 0 began it in: a step across a boundary mixes
			// the two rates, so only phases of 4 steps or more are
			// checked.
			pd := r.Result.PhaseDiscard
			if pd == nil || pd.CalmSteps >= 4 && (pd.Calm < 0.02 || pd.Calm > 0.2) || pd.CongestedSteps >= 4 && (pd.Congested < 0.4 || pd.Congested > 0.7) {
				t.Fatalf("oracle's phase discard %+v (want about 0.05 in calm phases and 0.6 in congested ones)", pd)
			}
		}
	}
	oracle, ok := an.Cell("short-phases", "oracle", 0.5)
	if !ok || len(oracle.SeedRatios) != 2 {
		t.Fatalf("oracle cell %+v", oracle)
	}
	for _, f := range []string{"suite.json", "suite.png"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	again, log := runSuite()
	if strings.Count(log, "kept from") != 10 {
		t.Fatalf("second run did not keep the 10 runs:\n%s", log)
	}
	a, _ := json.Marshal(rep.Analysis)
	b, _ := json.Marshal(again.Analysis)
	if !bytes.Equal(a, b) {
		t.Fatal("the resumed suite's analysis differs")
	}
}
