package sim

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/multirail/multirail/units"
)

const okRails = `
rails:
  - {name: a, rate: 100mbit, delay: 1ms}
`

func TestParseScenario(t *testing.T) {
	sc, err := ParseScenario("s.yaml", []byte(`
name: two
duration: 1.5s
seed: 7
segment_size: 8KiB
queue_depth: 4
eager_limit: -1
dispatch_interval: 20ms
known_bandwidths: true
series_bin: 10ms
schedulers: [shortestqueue, weighted]
rails:
  - name: a
    rate: 1.5gbit
    delay: 250us
    load:
      - {at: 1s, fraction: 0.25}
      - {period: 100ms, duty: 0.5, fraction: 0.1}
      - {kind: poisson, gap: 1s, length: 0.2, fraction: 1}
      - {points: [[0, 0.1], [0.5, 0]]}
  - {rate: 2e8}
traffic:
  kind: mixed
  sizes: [4KiB, {size: 1MiB, weight: 0.5}]
  rate: 100mbit
  count: 10
`))
	if err != nil {
		t.Fatal(err)
	}
	want := Scenario{
		Name: "two", Duration: 1500 * time.Millisecond, Seed: 7, SegmentSize: 8 << 10, QueueDepth: 4, EagerLimit: -1,
		DispatchInterval: 20 * time.Millisecond, KnownBandwidths: true, SeriesBin: 10 * time.Millisecond,
		Schedulers: []string{"shortestqueue", "weighted"},
		Rails: []Rail{
			{Name: "a", RateBps: 1.5e9, Delay: 250 * time.Microsecond, Load: []Load{
				{Kind: LoadStep, At: time.Second, Fraction: 0.25},
				{Kind: LoadOnOff, Period: 100 * time.Millisecond, Duty: 0.5, Fraction: 0.1},
				{Kind: LoadPoisson, Gap: time.Second, Length: 200 * time.Millisecond, Fraction: 1},
				{Kind: LoadTrace, Points: []TracePoint{{0, 0.1}, {500 * time.Millisecond, 0}}},
			}},
			{RateBps: 2e8},
		},
		Traffic: Traffic{Kind: KindMixed, Sizes: []SizeWeight{{4 << 10, 1}, {1 << 20, 0.5}}, RateBps: 100e6, Count: 10},
	}
	if got := *sc; !reflect.DeepEqual(got, want) {
		t.Errorf("parsed\n%+v\nwant\n%+v", got, want)
	}
}

func TestParseScenarioErrors(t *testing.T) {
	for _, c := range []struct {
		name, src, want string
	}{
		{"empty", ``, "f.yaml:1: empty scenario"},
		{"not a mapping", `[1, 2]`, "f.yaml:1: the scenario: want a mapping"},
		{"syntax", "rails: [\n  {name: a", "f.yaml:"},
		{"unknown field", "duration: 1s\nrail: []\n", `f.yaml:2: unknown field "rail" in the scenario`},
		{"unknown rail field", "duration: 1s\nrails:\n  - {name: a, rate: 1mbit, bandwidth: 3}\n", `f.yaml:3: unknown field "bandwidth" in a rail (allowed: name, rate, delay, load)`},
		{"bad rate", "duration: 1s\nrails:\n  - name: a\n    rate: 200mbt\n", `f.yaml:4: rails[0].rate: units: rate "200mbt": unknown unit "mbt"`},
		{"rate zero", "duration: 1s\nrails:\n  - {rate: 0}\n", `f.yaml:3: rails[0].rate: rate "0" is out of range`},
		{"missing rate", "duration: 1s\nrails:\n  - {name: a}\n", `f.yaml:3: rails[0]: missing rate`},
		{"negative delay", "duration: 1s\ntraffic: {kind: bulk}\nrails:\n  - rate: 1mbit\n    delay: -4ms\n", `f.yaml:5: rails[0].delay: units: duration "-4ms": negative`},
		{"bad delay", "rails:\n  - {rate: 1mbit, delay: soon}\n", `f.yaml:2: rails[0].delay: units: duration "soon"`},
		{"fraction above 1", "duration: 1s\ntraffic: {kind: bulk}\nrails:\n  - rate: 1mbit\n    load:\n      - {at: 1s, fraction: 1.5}\n", `f.yaml:6: rails[0].load[0].fraction: 1.5 is out of range; allowed a number in [0,1]`},
		{"fraction negative", "duration: 1s\ntraffic: {kind: bulk}\nrails:\n  - rate: 1mbit\n    load:\n      - kind: onoff\n        period: 1s\n        fraction: -0.1\n", `f.yaml:8: rails[0].load[0].fraction: -0.1 is out of range`},
		{"load kind", "rails:\n  - rate: 1mbit\n    load: [{kind: storm, fraction: 0.5}]\n", `f.yaml:3: rails[0].load[0].kind: unknown load kind "storm"`},
		{"load no kind", "rails:\n  - rate: 1mbit\n    load: [{fraction: 0.5}]\n", `f.yaml:3: rails[0].load[0]: missing kind`},
		{"load field of another kind", "duration: 1s\ntraffic: {kind: bulk}\nrails:\n  - rate: 1mbit\n    load: [{kind: step, at: 1s, period: 2s}]\n", `f.yaml:5: rails[0].load[0].period: does not apply to a load of kind step`},
		{"onoff without period", "duration: 1s\ntraffic: {kind: bulk}\nrails:\n  - rate: 1mbit\n    load:\n      - {kind: onoff, duty: 0.5}\n", `f.yaml:6: rails[0].load[0].period: 0s; allowed >= 100µs`},
		{"trace file in bytes", "rails:\n  - rate: 1mbit\n    load:\n      - {kind: trace, file: x.txt}\n", `f.yaml:4: rails[0].load[0].file: cannot read trace file "x.txt" here`},
		{"trace points decrease", "rails:\n  - rate: 1mbit\n    load:\n      - points:\n        - [1, 0.5]\n        - [0.5, 0]\n", `f.yaml:6: rails[0].load[0].points[1]: time 0.5 is before the previous point's 1`},
		{"unknown traffic kind", "duration: 1s\n" + okRails + "traffic:\n  kind: flood\n", `f.yaml:6: traffic.kind: unknown traffic kind "flood"; allowed: bulk, mixed, reqresp, allreduce`},
		{"traffic without kind", "duration: 1s\n" + okRails + "traffic: {size: 1MiB}\n", `f.yaml:5: traffic: missing kind`},
		{"traffic field of another kind", "duration: 1s\n" + okRails + "traffic:\n  kind: bulk\n  ranks: 4\n", `f.yaml:7: traffic.ranks: does not apply to traffic of kind bulk`},
		{"queue depth 0", "queue_depth: 0\n", `f.yaml:1: queue_depth: "0" is out of range; want an integer in 1..65536`},
		{"queue depth word", "queue_depth: deep\n", `f.yaml:1: queue_depth: "deep" is out of range`},
		{"segment size 0", "segment_size: 0\n", `f.yaml:1: segment_size: 0 is out of range`},
		{"segment size small", "duration: 1s\nsegment_size: 100\ntraffic: {kind: bulk}\n" + okRails, `f.yaml:2: segment_size: 100 is out of range; allowed 512..67108864 bytes`},
		{"bad size", "duration: 1s\n" + okRails + "traffic: {kind: bulk, size: 1MB2}\n", `f.yaml:5: traffic.size: units: size "1MB2"`},
		{"missing duration", okRails + "traffic: {kind: bulk}\n", `f.yaml:1: duration: missing`},
		{"no rails", "duration: 1s\ntraffic: {kind: bulk}\n", `f.yaml:1: rails: no rails`},
		{"duplicate field", "duration: 1s\nduration: 2s\n", `f.yaml:2: field "duration" given twice`},
		{"duplicate rail name", "duration: 1s\ntraffic: {kind: bulk}\nrails:\n  - {name: a, rate: 1mbit}\n  - {name: a, rate: 2mbit}\n", `f.yaml:5: rails[1].name: "a" is also the name of rails[0]`},
		{"unknown scheduler", "duration: 1s\ntraffic: {kind: bulk}\n" + okRails + "schedulers: [shortestqueue, fastest]\n", `f.yaml:6: schedulers[1]: unknown scheduler "fastest"`},
		{"dispatch interval", "duration: 1s\ndispatch_interval: 1ms\ntraffic: {kind: bulk}\n" + okRails, `f.yaml:2: dispatch_interval: 1ms is out of range`},
		{"allreduce ranks", "rails:\n  - {rate: 1gbit}\ntraffic: {kind: allreduce, ranks: 1}\n", `f.yaml:3: traffic.ranks: "1" is out of range; want an integer in 2..65536`},
		{"allreduce rails_max", "rails:\n  - {rate: 1gbit}\ntraffic:\n  kind: allreduce\n  ranks: 4\n  rails_max: 2\n", `f.yaml:6: traffic.rails_max: 2 is out of range`},
		{"mixed without sizes", "duration: 1s\n" + okRails + "traffic: {kind: mixed}\n", `f.yaml:5: traffic.sizes: missing`},
		{"mixed weight", "duration: 1s\n" + okRails + "traffic:\n  kind: mixed\n  sizes:\n    - {size: 1KiB, weight: -1}\n", `f.yaml:8: traffic.sizes[0].weight: -1; allowed a finite number > 0`},
		{"two documents", "duration: 1s\n---\nduration: 2s\n", `f.yaml:2: a second document`},
		{"seed", "seed: -1\n", `f.yaml:1: seed: "-1"`},
		{"json unknown field", "{\n  \"duration\": \"1s\",\n  \"rails\": [{\"rate\": \"1mbit\", \"speed\": 1}]\n}\n", `f.yaml:3: unknown field "speed" in a rail`},
		{"json bad fraction", "{\"duration\": \"1s\", \"traffic\": {\"kind\": \"bulk\"},\n \"rails\": [{\"rate\": \"1mbit\",\n   \"load\": [{\"at\": 1, \"fraction\": 2}]}]}\n", `f.yaml:3: rails[0].load[0].fraction: 2 is out of range`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseScenario("f.yaml", []byte(c.src))
			if err == nil {
				t.Fatalf("no error, want %q", c.want)
			}
			if !strings.HasPrefix(err.Error(), c.want) && !strings.Contains(err.Error(), c.want) {
				t.Errorf("error\n  %v\nwant it to contain\n  %s", err, c.want)
			}
			if !strings.HasPrefix(err.Error(), "f.yaml:") || strings.Count(err.Error(), "\n") > 0 {
				t.Errorf("error %q is not one line of the form f.yaml:LINE: reason", err)
			}
			if !errors.Is(err, ErrScenario) {
				t.Errorf("error %v does not wrap ErrScenario", err)
			}
		})
	}
}

func TestLoadScenarioFiles(t *testing.T) {
	sc, err := LoadScenario(filepath.Join("testdata", "example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	slow := sc.Rails[2]
	if len(slow.Load) != 2 || slow.Load[1].Kind != LoadTrace || len(slow.Load[1].Points) != 4 || slow.Load[1].Points[3].At != 4500*time.Millisecond {
		t.Errorf("trace load of rail slow: %+v", slow.Load)
	}
	sc.Duration = time.Second
	if _, err := Run(sc, "shortestqueue"); err != nil {
		t.Fatal(err)
	}
	js, err := LoadScenario(filepath.Join("testdata", "example.json"))
	if err != nil {
		t.Fatal(err)
	}
	if js.Rails[1].RateBps != 50e6 || js.Rails[1].Delay != 2*time.Millisecond || js.Traffic.Response != 256<<10 {
		t.Errorf("example.json parsed as %+v", js)
	}

	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(bad, []byte("# t f\n0 0.1\n1 1.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	scf := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(scf, []byte("duration: 1s\ntraffic: {kind: bulk}\nrails:\n  - rate: 1mbit\n    load: [{file: bad.txt}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = LoadScenario(scf)
	if want := bad + ":3: fraction 1.2 is out of range"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("bad trace: error %v, want %s...", err, want)
	}
	if err := os.WriteFile(scf, []byte("duration: 1s\ntraffic: {kind: bulk}\nrails:\n  - rate: 1mbit\n    load: [{file: missing.txt}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err = LoadScenario(scf); err == nil || !strings.HasPrefix(err.Error(), scf+":5: rails[0].load[0].file:") {
		t.Errorf("missing trace: error %v", err)
	}
	if _, err := LoadScenario(filepath.Join(dir, "nope.yaml")); err == nil {
		t.Error("missing scenario file: no error")
	}
}

func TestParseTrace(t *testing.T) {
	pts, err := ParseTrace("t", []byte("\n# c\n0 0.5\n  2.5   0.25 \n2.5 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 3 || pts[1] != (TracePoint{2500 * time.Millisecond, 0.25}) {
		t.Errorf("points %v", pts)
	}
	for src, want := range map[string]string{
		"0 0.5\n1\n":        "t:2: want \"time_s fraction\"",
		"1 0.5\n0 0.5\n":    "t:2: time 0 is before",
		"0 x\n":             "t:1: want two numbers",
		"-1 0\n":            "t:1: time -1 is out of range",
		"0 0\n\n\n5 -0.1\n": "t:4: fraction -0.1 is out of range",
	} {
		if _, err := ParseTrace("t", []byte(src)); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("ParseTrace(%q) = %v, want %s...", src, err, want)
		}
	}
}

// TestScenarioUnits: rates, sizes and durations follow package units'
// grammar, and a value it refuses gives an error that wraps both
// ErrScenario and the units error.
func TestScenarioUnits(t *testing.T) {
	sc, err := ParseScenario("u.yaml", []byte(`
duration: 1.5S
segment_size: 8kib
series_bin: 0.01
rails:
  - {rate: 2.5Gbit/s, delay: 0.001}
  - {rate: 1e6bit, delay: 250US}
  - {rate: 10 mbps}
  - {rate: 2e8}
traffic: {kind: bulk, size: 64 KIB}
`))
	if err != nil {
		t.Fatal(err)
	}
	if sc.Duration != 1500*time.Millisecond || sc.SegmentSize != 8<<10 || sc.SeriesBin != 10*time.Millisecond || sc.Traffic.Size != 64<<10 {
		t.Errorf("parsed %+v", sc)
	}
	want := []Rail{{RateBps: 2.5e9, Delay: time.Millisecond}, {RateBps: 1e6, Delay: 250 * time.Microsecond}, {RateBps: 10e6}, {RateBps: 2e8}}
	if !reflect.DeepEqual(sc.Rails, want) {
		t.Errorf("rails %+v, want %+v", sc.Rails, want)
	}
	for _, c := range []struct {
		src  string
		want error
	}{
		{"rails: [{rate: 200mbt}]\n", units.ErrSyntax},
		{"rails: [{rate: -1mbit}]\n", units.ErrRange},
		{"rails: [{rate: 1mbit, delay: -4ms}]\n", units.ErrRange},
		{"duration: soon\n", units.ErrSyntax},
		{"segment_size: 1.5KiB\n", units.ErrSyntax},
		{"segment_size: 99999999999GiB\n", units.ErrRange},
	} {
		_, err := ParseScenario("u.yaml", []byte(c.src))
		if !errors.Is(err, c.want) || !errors.Is(err, ErrScenario) || !strings.HasPrefix(err.Error(), "u.yaml:1: ") {
			t.Errorf("%q: error %v; want u.yaml:1: ... wrapping %v and ErrScenario", c.src, err, c.want)
		}
	}
	for _, src := range []string{"rails: [{rate: 0}]\n", "rails: [{rate: 101gbit}]\n", "traffic: {kind: bulk, rate: 0mbit}\n"} {
		_, err := ParseScenario("u.yaml", []byte(src))
		if err == nil || !strings.Contains(err.Error(), "is out of range; allowed > 0 and <= 100gbit") || !errors.Is(err, ErrScenario) {
			t.Errorf("%q: error %v; want out of range", src, err)
		}
	}
}
