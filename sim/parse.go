package sim

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/multirail/multirail/sched"
	"github.com/multirail/multirail/units"
	"go.yaml.in/yaml/v3"
)

// Forms of the values a scenario accepts, quoted in error messages.
const (
	formRate     = units.RateForm + ", > 0 and <= 100gbit"
	formSize     = units.SizeForm
	formDuration = units.DurationForm
	formFraction = "a number in [0,1]"
)

// MaxRateBps is the highest rail rate a scenario may give: 100 Gbit/s.
const MaxRateBps = 100e9

// Limits of a scenario file, so that a hostile file cannot make parsing
// expensive.
const (
	maxLoads     = 1024 // load entries per rail
	maxSizes     = 1024 // sizes of mixed traffic
	maxPoints    = 1 << 20
	maxFileBytes = 16 << 20
)

// ParseScenario parses a scenario from YAML or JSON (JSON is read as
// YAML). name stands for the source in error messages, which have the form
// "NAME:LINE: reason". Trace loads must give their points inline; use
// LoadScenario for trace files. The result is validated.
func ParseScenario(name string, data []byte) (*Scenario, error) {
	return parseScenario(name, data, nil)
}

// readFunc reads a trace file named in a scenario; it returns the name to
// use in error messages and the contents.
type readFunc func(file string) (string, []byte, error)

type parser struct {
	name  string
	lines map[string]int // field path -> line of its value
	read  readFunc
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func parseScenario(name string, data []byte, read readFunc) (*Scenario, error) {
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("%s:1: %w", name, &lineError{fmt.Sprintf("file is larger than %d bytes", maxFileBytes)})
	}
	p := &parser{name: name, lines: map[string]int{"": 1}, read: read}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, p.errf(1, "empty scenario; want a mapping with at least rails, traffic and duration")
		}
		return nil, p.yamlErr(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, p.yamlErr(err)
		}
		return nil, p.errf(extra.Line, "a second document; a scenario file holds one")
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil, p.errf(1, "empty scenario; want a mapping with at least rails, traffic and duration")
		}
		root = root.Content[0]
	}
	sc := &Scenario{}
	if err := p.scenario(root, sc); err != nil {
		return nil, err
	}
	if err := sc.Validate(); err != nil {
		return nil, p.fieldErr(err)
	}
	return sc, nil
}

func (p *parser) errf(line int, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %w", p.name, max(line, 1), &lineError{msg: fmt.Sprintf(format, args...)})
}

// lineError is the reason part of a parse error; it wraps ErrScenario.
type lineError struct{ msg string }

func (e *lineError) Error() string { return e.msg }
func (e *lineError) Unwrap() error { return ErrScenario }

// unitsErr is the error of a value at path that package units refused.
func (p *parser) unitsErr(line int, path string, err error) error {
	return fmt.Errorf("%s:%d: %w", p.name, max(line, 1), &unitsError{path: path, err: err})
}

// unitsError is the reason part of a parse error of a rate, size or
// duration; it wraps ErrScenario and the error of package units.
type unitsError struct {
	path string
	err  error
}

func (e *unitsError) Error() string   { return e.path + ": " + e.err.Error() }
func (e *unitsError) Unwrap() []error { return []error{ErrScenario, e.err} }

func (p *parser) yamlErr(err error) error {
	msg := err.Error()
	if te, ok := err.(*yaml.TypeError); ok && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return p.errf(n, "%s", m[2])
	}
	return p.errf(1, "%s", strings.TrimPrefix(msg, "yaml: "))
}

// fieldErr turns a Validate error into "NAME:LINE: reason", LINE being the
// line of the field or of the nearest enclosing one given in the file.
func (p *parser) fieldErr(err error) error {
	var fe *Error
	if !errors.As(err, &fe) {
		return p.errf(1, "%v", err)
	}
	path := fe.Field
	for {
		if line, ok := p.lines[path]; ok {
			return p.errf(line, "%s", fe.reason())
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return p.errf(1, "%s", fe.reason())
		}
		path = path[:i]
	}
}

func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}

// fields walks mapping n (at path) and calls set for each key, rejecting
// unknown and repeated keys.
func (p *parser) fields(n *yaml.Node, path, what string, allowed []string, set func(key string, v *yaml.Node, vpath string) error) error {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		return p.errf(n.Line, "%s: want a mapping with fields %s, got %s", orTop(path, what), strings.Join(allowed, ", "), kindName(n))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), deref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			return p.errf(k.Line, "%s: a field name must be a plain word, got %s", orTop(path, what), kindName(k))
		}
		key := k.Value
		if !slices.Contains(allowed, key) {
			return p.errf(k.Line, "unknown field %q in %s (allowed: %s)", key, what, strings.Join(allowed, ", "))
		}
		if seen[key] {
			return p.errf(k.Line, "field %q given twice in %s", key, what)
		}
		seen[key] = true
		vpath := key
		if path != "" {
			vpath = path + "." + key
		}
		p.lines[vpath] = v.Line
		if err := set(key, v, vpath); err != nil {
			return err
		}
	}
	return nil
}

func orTop(path, what string) string {
	if path == "" {
		return what
	}
	return path
}

func (p *parser) scalar(n *yaml.Node, path, want string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return "", p.errf(n.Line, "%s: want %s, got %s", path, want, kindName(n))
	}
	return n.Value, nil
}

func (p *parser) str(n *yaml.Node, path string) (string, error) {
	return p.scalar(n, path, "a string")
}

func (p *parser) rate(n *yaml.Node, path string) (float64, error) {
	s, err := p.scalar(n, path, formRate)
	if err != nil {
		return 0, err
	}
	v, err := units.ParseRate(s)
	if err != nil {
		return 0, p.unitsErr(n.Line, path, err)
	}
	if !(v > 0) || v > MaxRateBps {
		return 0, p.errf(n.Line, "%s: rate %q is out of range; allowed > 0 and <= 100gbit", path, s)
	}
	return v, nil
}

func (p *parser) size(n *yaml.Node, path string) (int64, error) {
	s, err := p.scalar(n, path, formSize)
	if err != nil {
		return 0, err
	}
	v, err := units.ParseSize(s)
	if err != nil {
		return 0, p.unitsErr(n.Line, path, err)
	}
	return v, nil
}

// positive parses a size that must not be 0 (0 would silently mean the
// default).
func (p *parser) positive(n *yaml.Node, path string, limit int64) (int64, error) {
	v, err := p.size(n, path)
	if err != nil {
		return 0, err
	}
	if v < 1 || v > limit {
		return 0, p.errf(n.Line, "%s: %d is out of range; allowed 1..%d", path, v, limit)
	}
	return v, nil
}

func (p *parser) duration(n *yaml.Node, path string) (time.Duration, error) {
	s, err := p.scalar(n, path, formDuration)
	if err != nil {
		return 0, err
	}
	v, err := units.ParseDuration(s)
	if err != nil {
		return 0, p.unitsErr(n.Line, path, err)
	}
	return v, nil
}

func (p *parser) float(n *yaml.Node, path, want string) (float64, error) {
	s, err := p.scalar(n, path, want)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0, p.errf(n.Line, "%s: %q is not a number; want %s", path, s, want)
	}
	return v, nil
}

func (p *parser) integer(n *yaml.Node, path string, lo, hi int64) (int64, error) {
	want := fmt.Sprintf("an integer in %d..%d", lo, hi)
	s, err := p.scalar(n, path, want)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || v < lo || v > hi {
		return 0, p.errf(n.Line, "%s: %q is out of range; want %s", path, s, want)
	}
	return v, nil
}

func (p *parser) boolean(n *yaml.Node, path string) (bool, error) {
	s, err := p.scalar(n, path, "true or false")
	if err != nil {
		return false, err
	}
	switch strings.ToLower(s) {
	case "true", "yes", "on":
		return true, nil
	case "false", "no", "off":
		return false, nil
	}
	return false, p.errf(n.Line, "%s: %q; want true or false", path, s)
}

func (p *parser) seq(n *yaml.Node, path string, limit int) ([]*yaml.Node, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, p.errf(n.Line, "%s: want a list, got %s", path, kindName(n))
	}
	if len(n.Content) > limit {
		return nil, p.errf(n.Line, "%s: %d entries; allowed at most %d", path, len(n.Content), limit)
	}
	out := make([]*yaml.Node, len(n.Content))
	for i, c := range n.Content {
		c = deref(c)
		p.lines[fmt.Sprintf("%s[%d]", path, i)] = c.Line
		out[i] = c
	}
	return out, nil
}

var scenarioFields = []string{"name", "duration", "seed", "segment_size", "queue_depth", "eager_limit", "plan_min",
	"dispatch_interval", "known_bandwidths", "series_bin", "rails", "traffic", "schedulers", "sched_options"}

func (p *parser) scenario(n *yaml.Node, sc *Scenario) error {
	return p.fields(n, "", "the scenario", scenarioFields, func(key string, v *yaml.Node, path string) (err error) {
		switch key {
		case "name":
			sc.Name, err = p.str(v, path)
		case "duration":
			sc.Duration, err = p.duration(v, path)
		case "seed":
			var s string
			if s, err = p.scalar(v, path, "an integer >= 0"); err == nil {
				if sc.Seed, err = strconv.ParseUint(strings.TrimSpace(s), 0, 64); err != nil {
					err = p.errf(v.Line, "%s: %q; want an integer in 0..%d", path, s, uint64(1<<64-1))
				}
			}
		case "segment_size":
			var x int64
			x, err = p.positive(v, path, 1<<40)
			sc.SegmentSize = int(x)
		case "queue_depth":
			var x int64
			x, err = p.integer(v, path, 1, 65536)
			sc.QueueDepth = int(x)
		case "eager_limit":
			var s string
			if s, err = p.scalar(v, path, formSize+", or a negative number to turn eager sends off"); err == nil {
				if x, perr := strconv.ParseInt(strings.TrimSpace(s), 10, 64); perr == nil && x < 0 {
					sc.EagerLimit = -1
				} else {
					var y int64
					y, err = p.positive(v, path, 1<<40)
					sc.EagerLimit = int(y)
				}
			}
		case "plan_min":
			var s string
			if s, err = p.scalar(v, path, formSize+", or a negative number to turn planning off"); err == nil {
				if x, perr := strconv.ParseInt(strings.TrimSpace(s), 10, 64); perr == nil && x < 0 {
					sc.PlanMin = -1
				} else {
					var y int64
					y, err = p.positive(v, path, 1<<40)
					sc.PlanMin = int(y)
				}
			}
		case "dispatch_interval":
			sc.DispatchInterval, err = p.duration(v, path)
		case "known_bandwidths":
			sc.KnownBandwidths, err = p.boolean(v, path)
		case "series_bin":
			sc.SeriesBin, err = p.duration(v, path)
		case "rails":
			sc.Rails, err = p.rails(v, path)
		case "traffic":
			err = p.traffic(v, path, &sc.Traffic)
		case "schedulers":
			sc.Schedulers, err = p.schedulers(v, path)
		case "sched_options":
			sc.SchedOptions = map[string]string{}
			err = p.fields(v, path, path, sched.Names(), func(key string, v *yaml.Node, vpath string) error {
				s, err := p.str(v, vpath)
				sc.SchedOptions[key] = s
				return err
			})
		}
		return err
	})
}

func (p *parser) schedulers(v *yaml.Node, path string) ([]string, error) {
	var names []string
	if v.Kind == yaml.ScalarNode {
		if strings.TrimSpace(v.Value) == "all" {
			return nil, nil
		}
		for s := range strings.SplitSeq(v.Value, ",") {
			names = append(names, strings.TrimSpace(s))
		}
	} else {
		items, err := p.seq(v, path, MaxRails)
		if err != nil {
			return nil, err
		}
		for i, it := range items {
			s, err := p.str(it, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			names = append(names, s)
		}
	}
	for i := range names {
		p.lines[fmt.Sprintf("%s[%d]", path, i)] = v.Line
		if len(v.Content) > i {
			p.lines[fmt.Sprintf("%s[%d]", path, i)] = deref(v.Content[i]).Line
		}
	}
	if len(names) == 0 {
		return nil, p.errf(v.Line, "%s: empty; give scheduler names or \"all\"", path)
	}
	return names, nil
}

var railFields = []string{"name", "rate", "delay", "load"}

func (p *parser) rails(v *yaml.Node, path string) ([]Rail, error) {
	items, err := p.seq(v, path, MaxRails)
	if err != nil {
		return nil, err
	}
	rails := make([]Rail, len(items))
	for i, it := range items {
		r := &rails[i]
		rp := fmt.Sprintf("%s[%d]", path, i)
		err := p.fields(it, rp, "a rail", railFields, func(key string, v *yaml.Node, path string) (err error) {
			switch key {
			case "name":
				r.Name, err = p.str(v, path)
			case "rate":
				r.RateBps, err = p.rate(v, path)
			case "delay":
				r.Delay, err = p.duration(v, path)
			case "load":
				r.Load, err = p.loads(v, path)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		if r.RateBps == 0 {
			return nil, p.errf(it.Line, "%s: missing rate (%s)", rp, formRate)
		}
	}
	return rails, nil
}

var loadFields = []string{"kind", "fraction", "at", "period", "duty", "start", "gap", "length", "file", "points"}

func (p *parser) loads(v *yaml.Node, path string) ([]Load, error) {
	items, err := p.seq(v, path, maxLoads)
	if err != nil {
		return nil, err
	}
	loads := make([]Load, len(items))
	for i, it := range items {
		l := &loads[i]
		lp := fmt.Sprintf("%s[%d]", path, i)
		var fileLine int
		err := p.fields(it, lp, "a load", loadFields, func(key string, v *yaml.Node, path string) (err error) {
			switch key {
			case "kind":
				l.Kind, err = p.str(v, path)
			case "fraction":
				l.Fraction, err = p.float(v, path, formFraction)
			case "at":
				l.At, err = p.duration(v, path)
			case "period":
				l.Period, err = p.duration(v, path)
			case "duty":
				l.Duty, err = p.float(v, path, formFraction)
			case "start":
				l.Start, err = p.duration(v, path)
			case "gap":
				l.Gap, err = p.duration(v, path)
			case "length":
				l.Length, err = p.duration(v, path)
			case "file":
				l.File, err = p.str(v, path)
				fileLine = v.Line
			case "points":
				l.Points, err = p.points(v, path)
				if err == nil && l.Points == nil {
					l.Points = []TracePoint{}
				}
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		if l.Kind == "" {
			l.Kind = inferLoadKind(it)
			if l.Kind == "" {
				return nil, p.errf(it.Line, "%s: missing kind (allowed: %s)", lp, strings.Join(loadKinds, ", "))
			}
		}
		if l.File != "" {
			if l.Points != nil {
				return nil, p.errf(fileLine, "%s: give a file or points, not both", lp)
			}
			if p.read == nil {
				return nil, p.errf(fileLine, "%s.file: cannot read trace file %q here; load the scenario from a file, or give points inline", lp, l.File)
			}
			tname, data, err := p.read(l.File)
			if err != nil {
				return nil, p.errf(fileLine, "%s.file: %v", lp, err)
			}
			if l.Points, err = ParseTrace(tname, data); err != nil {
				return nil, err
			}
		}
	}
	return loads, nil
}

// inferLoadKind guesses a load's kind from its fields when it gives none.
func inferLoadKind(n *yaml.Node) string {
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch deref(n.Content[i]).Value {
		case "at":
			return LoadStep
		case "period", "duty":
			return LoadOnOff
		case "gap", "length":
			return LoadPoisson
		case "file", "points":
			return LoadTrace
		}
	}
	return ""
}

func (p *parser) points(v *yaml.Node, path string) ([]TracePoint, error) {
	items, err := p.seq(v, path, maxPoints)
	if err != nil {
		return nil, err
	}
	var pts []TracePoint
	for i, it := range items {
		ip := fmt.Sprintf("%s[%d]", path, i)
		if it.Kind != yaml.SequenceNode || len(it.Content) != 2 {
			return nil, p.errf(it.Line, "%s: want a pair [time_s, fraction], got %s", ip, kindName(it))
		}
		t, err := p.float(deref(it.Content[0]), ip, "a time in seconds >= 0")
		if err != nil {
			return nil, err
		}
		f, err := p.float(deref(it.Content[1]), ip, formFraction)
		if err != nil {
			return nil, err
		}
		pt, err := tracePoint(t, f, pts)
		if err != nil {
			return nil, p.errf(it.Line, "%s: %v", ip, err)
		}
		pts = append(pts, pt)
	}
	return pts, nil
}

func tracePoint(t, f float64, before []TracePoint) (TracePoint, error) {
	if !(t >= 0 && t <= MaxDuration.Seconds()) {
		return TracePoint{}, fmt.Errorf("time %v is out of range; allowed 0..%v seconds", t, MaxDuration.Seconds())
	}
	if !validFraction(f) {
		return TracePoint{}, fmt.Errorf("fraction %v is out of range; allowed %s", f, formFraction)
	}
	at := time.Duration(t * 1e9)
	if n := len(before); n > 0 && at < before[n-1].At {
		return TracePoint{}, fmt.Errorf("time %v is before the previous point's %v; times must not decrease", t, before[n-1].At.Seconds())
	}
	return TracePoint{At: at, Fraction: f}, nil
}

// ParseTrace parses a load trace: one point "time_s fraction" per line
// (seconds from the start of the run, and the fraction of the rail's
// capacity taken from then on), times non-decreasing. Blank lines and
// lines starting with # are skipped. Errors have the form "NAME:LINE:
// reason".
func ParseTrace(name string, data []byte) ([]TracePoint, error) {
	pts := []TracePoint{}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("%s:%d: %w", name, i+1, &lineError{fmt.Sprintf("want \"time_s fraction\", got %q", line)})
		}
		t, err1 := strconv.ParseFloat(f[0], 64)
		fr, err2 := strconv.ParseFloat(f[1], 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, i+1, &lineError{fmt.Sprintf("want two numbers \"time_s fraction\", got %q", line)})
		}
		pt, err := tracePoint(t, fr, pts)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, i+1, &lineError{err.Error()})
		}
		if len(pts) == maxPoints {
			return nil, fmt.Errorf("%s:%d: %w", name, i+1, &lineError{fmt.Sprintf("more than %d points", maxPoints)})
		}
		pts = append(pts, pt)
	}
	return pts, nil
}

var trafficFields = []string{"kind", "size", "window", "count", "sizes", "rate", "load", "request", "response",
	"reverse_rails", "ranks", "iterations", "rails_min", "rails_max", "rate_jitter"}

func (p *parser) traffic(v *yaml.Node, path string, t *Traffic) error {
	err := p.fields(v, path, "traffic", trafficFields, func(key string, v *yaml.Node, path string) (err error) {
		var x int64
		switch key {
		case "kind":
			t.Kind, err = p.str(v, path)
		case "size":
			t.Size, err = p.positive(v, path, 1<<40)
		case "window":
			x, err = p.integer(v, path, 1, 1<<20)
			t.Window = int(x)
		case "count":
			t.Count, err = p.integer(v, path, 1, 1<<50)
		case "sizes":
			t.Sizes, err = p.sizes(v, path)
		case "rate":
			t.RateBps, err = p.rate(v, path)
		case "load":
			t.Load, err = p.float(v, path, "a fraction of the rails' total rate > 0")
			if err == nil && t.Load == 0 {
				err = p.errf(v.Line, "%s: 0; want a fraction > 0 (leave load out for back-to-back traffic)", path)
			}
		case "request":
			t.Request, err = p.positive(v, path, 1<<40)
		case "response":
			t.Response, err = p.positive(v, path, 1<<40)
		case "reverse_rails":
			t.ReverseRails, err = p.rails(v, path)
		case "ranks":
			x, err = p.integer(v, path, 2, MaxRanks)
			t.Ranks = int(x)
		case "iterations":
			x, err = p.integer(v, path, 1, 1<<20)
			t.Iterations = int(x)
		case "rails_min":
			x, err = p.integer(v, path, 1, MaxRails)
			t.RailsMin = int(x)
		case "rails_max":
			x, err = p.integer(v, path, 1, MaxRails)
			t.RailsMax = int(x)
		case "rate_jitter":
			t.RateJitter, err = p.float(v, path, "a number in [0,1)")
		}
		return err
	})
	if err != nil {
		return err
	}
	if t.Kind == "" {
		return p.errf(v.Line, "%s: missing kind (allowed: %s)", path, strings.Join(trafficKinds, ", "))
	}
	return nil
}

func (p *parser) sizes(v *yaml.Node, path string) ([]SizeWeight, error) {
	items, err := p.seq(v, path, maxSizes)
	if err != nil {
		return nil, err
	}
	out := make([]SizeWeight, len(items))
	for i, it := range items {
		ip := fmt.Sprintf("%s[%d]", path, i)
		sw := &out[i]
		sw.Weight = 1
		if it.Kind == yaml.ScalarNode {
			if sw.Size, err = p.positive(it, ip, 1<<40); err != nil {
				return nil, err
			}
			continue
		}
		err := p.fields(it, ip, "a message size", []string{"size", "weight"}, func(key string, v *yaml.Node, path string) (err error) {
			switch key {
			case "size":
				sw.Size, err = p.positive(v, path, 1<<40)
			case "weight":
				sw.Weight, err = p.float(v, path, "a number > 0")
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		if sw.Size == 0 {
			return nil, p.errf(it.Line, "%s: missing size", ip)
		}
	}
	return out, nil
}
