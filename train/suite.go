package train

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// A training suite runs every setting (fixed discard rates, controllers)
// on every scenario (network and load) and seed, and asks whether an
// adaptive setting is close to the best fixed rate everywhere, where each
// fixed rate is bad somewhere (issue 28). This file is the suite's pure
// part: naming settings, scoring runs against the best fixed rate chosen
// by cross-fitting, the worst case over scenarios with a bootstrap
// interval, the validity check and the calibration fit. Running the
// settings is the command's (multirail train suite).

// FixedSetting is the name of the setting that pins the discard rate to
// r ("fixed:0.2"); rate 0 is the reliable mode.
func FixedSetting(r float64) string { return "fixed:" + strconv.FormatFloat(r, 'f', -1, 64) }

// ParseFixedSetting returns the rate of a FixedSetting name.
func ParseFixedSetting(s string) (float64, bool) {
	v, ok := strings.CutPrefix(s, "fixed:")
	if !ok {
		return 0, false
	}
	r, err := strconv.ParseFloat(v, 64)
	return r, err == nil && r >= 0 && r < 1
}

// SuiteRun is one run of the suite: one setting on one scenario and seed.
type SuiteRun struct {
	Scenario string `json:"scenario"`
	Setting  string `json:"setting"`
	Seed     uint64 `json:"seed"`
	Result   Result `json:"result"`
}

// timeTo returns the run's time to target t and whether it reached it;
// a run that did not is censored at its whole training time.
func (r SuiteRun) timeTo(t float64) (float64, bool) {
	for _, x := range r.Result.Targets {
		if x.Accuracy == t {
			if x.Time != nil {
				return *x.Time, true
			}
			break
		}
	}
	return r.Result.Wall, false
}

// SuiteCell is one setting on one scenario for one target, over the
// scoring seeds.
type SuiteCell struct {
	Scenario string  `json:"scenario"`
	Setting  string  `json:"setting"`
	Target   float64 `json:"target"`
	// MeanTime is the mean time to the target over the seeds, seconds
	// (runs that missed it count their whole time: Censored of them).
	MeanTime float64 `json:"mean_time_s"`
	Censored int     `json:"censored"`
	// MeanSteps is the mean steps to the target of the runs that reached
	// it (0 when none did).
	MeanSteps float64 `json:"mean_steps"`
	// Ratio is the geometric mean over the seeds of the run's time over
	// the time of the best fixed setting chosen without that seed
	// (cross-fitting); SeedRatios are the seeds' ratios, in seed order.
	Ratio      float64   `json:"ratio"`
	SeedRatios []float64 `json:"seed_ratios"`
	// SeedTimes are the runs' times to the target in seed order, and
	// SeedMissed whether each missed it (its time is then the run's).
	SeedTimes  []float64 `json:"seed_times_s"`
	SeedMissed []bool    `json:"seed_missed"`
	// Best names, per seed, the fixed setting chosen on the other seeds.
	Best []string `json:"best"`
	// FinalAccuracy, MeanStep and the discarded shares are means over
	// the seeds; CalmDiscard and CongestedDiscard only under a phases
	// load (-1 otherwise).
	FinalAccuracy    float64 `json:"final_accuracy"`
	MeanStep         float64 `json:"mean_step_s"`
	MeanDiscard      float64 `json:"mean_discard"`
	CalmDiscard      float64 `json:"calm_discard"`
	CongestedDiscard float64 `json:"congested_discard"`
	// CalmStep and CongestedStep are the mean step times in each phase,
	// seconds (phases loads only, -1 otherwise).
	CalmStep      float64 `json:"calm_step_s"`
	CongestedStep float64 `json:"congested_step_s"`
}

// SuiteSummary is one setting's worst case over the scenarios for one
// target: its largest Ratio (minimax regret), where, and a bootstrap
// interval over the seeds.
type SuiteSummary struct {
	Setting  string     `json:"setting"`
	Target   float64    `json:"target"`
	Worst    float64    `json:"worst_ratio"`
	Where    string     `json:"worst_scenario"`
	Interval [2]float64 `json:"interval"`
}

// SuiteVerdict is the suite's answer for one target.
type SuiteVerdict struct {
	Target float64 `json:"target"`
	// BestFixed is the fixed setting with the smallest worst case.
	BestFixed string `json:"best_fixed"`
	// Difference is the worst case of Setting minus BestFixed's (negative:
	// the setting's worst case is lower), with a bootstrap interval.
	Setting    string     `json:"setting"`
	Difference float64    `json:"difference"`
	Interval   [2]float64 `json:"interval"`
	// Valid is whether every fixed setting is at least ValidityRatio
	// times the best somewhere (else the suite is too easy to tell them
	// apart); Easy names those that are not.
	Valid bool     `json:"valid"`
	Easy  []string `json:"easy,omitempty"`
}

// SuiteReport is Analyze's result.
type SuiteReport struct {
	Scenarios []string       `json:"scenarios"`
	Settings  []string       `json:"settings"`
	Seeds     []uint64       `json:"seeds"`
	Targets   []float64      `json:"targets"`
	Cells     []SuiteCell    `json:"cells"`
	Summary   []SuiteSummary `json:"summary"`
	Verdicts  []SuiteVerdict `json:"verdicts"`
}

// ValidityRatio is how much worse than the best every fixed setting must
// be on some scenario for the suite to tell settings apart.
const ValidityRatio = 1.10

// Cell returns the cell of a scenario, setting and target.
func (r *SuiteReport) Cell(scenario, setting string, target float64) (SuiteCell, bool) {
	for _, c := range r.Cells {
		if c.Scenario == scenario && c.Setting == setting && c.Target == target {
			return c, true
		}
	}
	return SuiteCell{}, false
}

// Analyze scores runs: for every scenario, setting and target the ratio
// to the best fixed setting chosen by leave-one-seed-out cross-fitting
// (with a single seed, in sample), each setting's worst case over the
// scenarios with a percentile bootstrap interval over the seeds (boot
// resamples drawn from rng, the same resample for every setting of a
// scenario), the verdict of setting against the best single fixed
// setting, and the validity check. Every scenario needs every setting on
// every seed, and at least one fixed setting (FixedSetting names).
func Analyze(runs []SuiteRun, targets []float64, setting string, boot int, rng *rand.Rand) (SuiteReport, error) {
	rep := SuiteReport{Targets: targets}
	byKey := map[[2]string]map[uint64]SuiteRun{}
	for _, r := range runs {
		if !slices.Contains(rep.Scenarios, r.Scenario) {
			rep.Scenarios = append(rep.Scenarios, r.Scenario)
		}
		if !slices.Contains(rep.Settings, r.Setting) {
			rep.Settings = append(rep.Settings, r.Setting)
		}
		if !slices.Contains(rep.Seeds, r.Seed) {
			rep.Seeds = append(rep.Seeds, r.Seed)
		}
		k := [2]string{r.Scenario, r.Setting}
		if byKey[k] == nil {
			byKey[k] = map[uint64]SuiteRun{}
		}
		if _, dup := byKey[k][r.Seed]; dup {
			return rep, fmt.Errorf("train: suite: two runs of %s on %s with seed %d", r.Setting, r.Scenario, r.Seed)
		}
		byKey[k][r.Seed] = r
	}
	slices.Sort(rep.Seeds)
	var fixed []string
	for _, s := range rep.Settings {
		if _, ok := ParseFixedSetting(s); ok {
			fixed = append(fixed, s)
		}
	}
	if len(fixed) == 0 {
		return rep, fmt.Errorf("train: suite: no fixed setting among %v", rep.Settings)
	}
	if !slices.Contains(rep.Settings, setting) {
		return rep, fmt.Errorf("train: suite: setting %q not among %v", setting, rep.Settings)
	}
	for _, sc := range rep.Scenarios {
		for _, st := range rep.Settings {
			for _, seed := range rep.Seeds {
				if _, ok := byKey[[2]string{sc, st}][seed]; !ok {
					return rep, fmt.Errorf("train: suite: no run of %s on %s with seed %d", st, sc, seed)
				}
			}
		}
	}
	nSeeds := len(rep.Seeds)
	for _, tg := range targets {
		// times[scenario][setting][seed index]
		times := map[string]map[string][]float64{}
		for _, sc := range rep.Scenarios {
			times[sc] = map[string][]float64{}
			for _, st := range rep.Settings {
				ts := make([]float64, nSeeds)
				for i, seed := range rep.Seeds {
					ts[i], _ = byKey[[2]string{sc, st}][seed].timeTo(tg)
				}
				times[sc][st] = ts
			}
		}
		// ratios[scenario][setting][seed index], against the fixed
		// setting chosen without that seed.
		ratios := map[string]map[string][]float64{}
		for _, sc := range rep.Scenarios {
			ratios[sc] = map[string][]float64{}
			best := make([]string, nSeeds)
			for i := range nSeeds {
				best[i] = bestFixed(times[sc], fixed, i)
			}
			for _, st := range rep.Settings {
				rs := make([]float64, nSeeds)
				for i := range nSeeds {
					rs[i] = times[sc][st][i] / times[sc][best[i]][i]
				}
				ratios[sc][st] = rs
				rep.Cells = append(rep.Cells, cellOf(sc, st, tg, rep.Seeds, byKey[[2]string{sc, st}], rs, best))
			}
		}
		worst := func(st string, idx []int) (float64, string) {
			w, where := math.Inf(-1), ""
			for _, sc := range rep.Scenarios {
				if g := geoMean(ratios[sc][st], idx); g > w {
					w, where = g, sc
				}
			}
			return w, where
		}
		all := make([]int, nSeeds)
		for i := range all {
			all[i] = i
		}
		// Bootstrap resamples: per scenario, seed indices with
		// replacement, shared by every setting.
		samples := make([]map[string][]int, boot)
		for b := range samples {
			samples[b] = map[string][]int{}
			for _, sc := range rep.Scenarios {
				idx := make([]int, nSeeds)
				for i := range idx {
					idx[i] = rng.IntN(nSeeds)
				}
				samples[b][sc] = idx
			}
		}
		worstIn := func(st string, sample map[string][]int) float64 {
			w := math.Inf(-1)
			for _, sc := range rep.Scenarios {
				w = max(w, geoMean(ratios[sc][st], sample[sc]))
			}
			return w
		}
		worsts := map[string]float64{}
		for _, st := range rep.Settings {
			w, where := worst(st, all)
			worsts[st] = w
			bs := make([]float64, boot)
			for b := range bs {
				bs[b] = worstIn(st, samples[b])
			}
			rep.Summary = append(rep.Summary, SuiteSummary{Setting: st, Target: tg, Worst: w, Where: where, Interval: percentiles(bs)})
		}
		v := SuiteVerdict{Target: tg, Setting: setting, Valid: true}
		for _, f := range fixed {
			if v.BestFixed == "" || worsts[f] < worsts[v.BestFixed] {
				v.BestFixed = f
			}
			somewhere := false
			for _, sc := range rep.Scenarios {
				somewhere = somewhere || geoMean(ratios[sc][f], all) >= ValidityRatio
			}
			if !somewhere {
				v.Valid = false
				v.Easy = append(v.Easy, f)
			}
		}
		v.Difference = worsts[setting] - worsts[v.BestFixed]
		ds := make([]float64, boot)
		for b := range ds {
			ds[b] = worstIn(setting, samples[b]) - worstIn(v.BestFixed, samples[b])
		}
		v.Interval = percentiles(ds)
		rep.Verdicts = append(rep.Verdicts, v)
	}
	return rep, nil
}

// ScoreAside adds to rep the cells of setting, one that is shown beside
// the fixed rates but not compared with them (the oracle, which runs on
// phased scenarios only; the reliable mode, another algorithm): on each
// scenario and target where rep has cells and setting has a run of every
// seed, its times against the fixed rates rep chose for each seed (runs
// must hold those fixed rates' runs too). A scenario where setting lacks
// a seed is skipped. rep's summary and verdicts are not changed.
func (rep *SuiteReport) ScoreAside(runs []SuiteRun, setting string) {
	mine := map[string]map[uint64]SuiteRun{}
	fixed := map[string]map[string]map[uint64]SuiteRun{} // scenario, setting, seed
	for _, r := range runs {
		if r.Setting == setting {
			if mine[r.Scenario] == nil {
				mine[r.Scenario] = map[uint64]SuiteRun{}
			}
			mine[r.Scenario][r.Seed] = r
		} else if _, ok := ParseFixedSetting(r.Setting); ok {
			if fixed[r.Scenario] == nil {
				fixed[r.Scenario] = map[string]map[uint64]SuiteRun{}
			}
			if fixed[r.Scenario][r.Setting] == nil {
				fixed[r.Scenario][r.Setting] = map[uint64]SuiteRun{}
			}
			fixed[r.Scenario][r.Setting][r.Seed] = r
		}
	}
	added := false
	for _, tg := range rep.Targets {
		for _, sc := range rep.Scenarios {
			i := slices.IndexFunc(rep.Cells, func(c SuiteCell) bool { return c.Scenario == sc && c.Target == tg })
			if i < 0 || len(mine[sc]) == 0 {
				continue
			}
			ref := rep.Cells[i]
			ratios := make([]float64, 0, len(rep.Seeds))
			for i, seed := range rep.Seeds {
				r, have := mine[sc][seed]
				b, haveBest := fixed[sc][ref.Best[i]][seed]
				if !have || !haveBest {
					break
				}
				t, _ := r.timeTo(tg)
				tb, _ := b.timeTo(tg)
				ratios = append(ratios, t/tb)
			}
			if len(ratios) != len(rep.Seeds) {
				continue
			}
			rep.Cells = append(rep.Cells, cellOf(sc, setting, tg, rep.Seeds, mine[sc], ratios, ref.Best))
			added = true
		}
	}
	if added && !slices.Contains(rep.Settings, setting) {
		rep.Settings = append(rep.Settings, setting)
	}
}

// bestFixed returns the fixed setting of least mean time over the seeds
// but skip (all of them when there is only one seed).
func bestFixed(times map[string][]float64, fixed []string, skip int) string {
	best, bestMean := "", math.Inf(1)
	for _, f := range fixed {
		sum, n := 0.0, 0
		for i, t := range times[f] {
			if i != skip || len(times[f]) == 1 {
				sum += t
				n++
			}
		}
		if m := sum / float64(n); m < bestMean {
			best, bestMean = f, m
		}
	}
	return best
}

func cellOf(sc, st string, tg float64, seeds []uint64, runs map[uint64]SuiteRun, ratios []float64, best []string) SuiteCell {
	c := SuiteCell{Scenario: sc, Setting: st, Target: tg, SeedRatios: ratios, Best: best, CalmDiscard: -1, CongestedDiscard: -1, CalmStep: -1, CongestedStep: -1}
	var steps, reached float64
	var calm, cong, calmStep, congStep float64
	phased := 0
	for _, seed := range seeds {
		r := runs[seed]
		t, ok := r.timeTo(tg)
		c.SeedTimes, c.SeedMissed = append(c.SeedTimes, t), append(c.SeedMissed, !ok)
		c.MeanTime += t / float64(len(seeds))
		if !ok {
			c.Censored++
		} else {
			for _, x := range r.Result.Targets {
				if x.Accuracy == tg && x.Steps != nil {
					steps += float64(*x.Steps)
					reached++
				}
			}
		}
		c.FinalAccuracy += r.Result.FinalAccuracy / float64(len(seeds))
		c.MeanStep += r.Result.MeanStep / float64(len(seeds))
		c.MeanDiscard += r.Result.MeanDiscardRate / float64(len(seeds))
		if pd := r.Result.PhaseDiscard; pd != nil {
			calm += pd.Calm
			cong += pd.Congested
			calmStep += pd.CalmStep
			congStep += pd.CongestedStep
			phased++
		}
	}
	if reached > 0 {
		c.MeanSteps = steps / reached
	}
	if phased > 0 {
		c.CalmDiscard, c.CongestedDiscard = calm/float64(phased), cong/float64(phased)
		c.CalmStep, c.CongestedStep = calmStep/float64(phased), congStep/float64(phased)
	}
	all := make([]int, len(ratios))
	for i := range all {
		all[i] = i
	}
	c.Ratio = geoMean(ratios, all)
	return c
}

// geoMean is the geometric mean of v at the indices idx.
func geoMean(v []float64, idx []int) float64 {
	s := 0.0
	for _, i := range idx {
		s += math.Log(v[i])
	}
	return math.Exp(s / float64(len(idx)))
}

// percentiles returns the 2.5th and 97.5th percentiles of v (v is
// sorted in place); zeros when v is empty.
func percentiles(v []float64) [2]float64 {
	if len(v) == 0 {
		return [2]float64{}
	}
	sort.Float64s(v)
	at := func(q float64) float64 { return v[min(len(v)-1, int(q*float64(len(v))))] }
	return [2]float64{at(0.025), at(0.975)}
}

// Calibration is the fit of how the steps to a target grow with the
// discard rate: steps(R) = Steps0 (1 + K R/(1-R)), the estimator's
// variance growing as R/(1-R), fitted by least squares to points of
// (rate, steps).
type Calibration struct {
	Target float64 `json:"target"`
	Steps0 float64 `json:"steps0"`
	K      float64 `json:"k"`
	// Points are the means per rate the fit used.
	Points []CalibrationPoint `json:"points"`
}

// CalibrationPoint is the mean steps to the target at one rate, over the
// runs that reached it.
type CalibrationPoint struct {
	Rate  float64 `json:"rate"`
	Steps float64 `json:"steps"`
	Runs  int     `json:"runs"`
}

// Predict returns the fitted steps at rate r.
func (c Calibration) Predict(r float64) float64 { return c.Steps0 * (1 + c.K*r/(1-r)) }

// Calibrate fits steps to target against the rate over the runs of fixed
// settings (other runs are ignored; runs that missed the target too). It
// needs reached runs at two rates at least.
func Calibrate(runs []SuiteRun, target float64) (Calibration, error) {
	c := Calibration{Target: target}
	byRate := map[float64][]float64{}
	for _, r := range runs {
		rate, ok := ParseFixedSetting(r.Setting)
		if !ok {
			continue
		}
		for _, x := range r.Result.Targets {
			if x.Accuracy == target && x.Steps != nil {
				byRate[rate] = append(byRate[rate], float64(*x.Steps))
			}
		}
	}
	var xs, ys []float64
	for rate, st := range byRate {
		m := 0.0
		for _, s := range st {
			m += s / float64(len(st))
		}
		c.Points = append(c.Points, CalibrationPoint{Rate: rate, Steps: m, Runs: len(st)})
		xs, ys = append(xs, rate/(1-rate)), append(ys, m)
	}
	slices.SortFunc(c.Points, func(a, b CalibrationPoint) int { return cmp.Compare(a.Rate, b.Rate) })
	if len(xs) < 2 {
		return c, fmt.Errorf("train: calibration for %v: runs that reached it at %d rate(s); need 2", target, len(xs))
	}
	// ys = a + b xs by least squares; Steps0 = a, K = b/a.
	var mx, my float64
	for i := range xs {
		mx += xs[i] / float64(len(xs))
		my += ys[i] / float64(len(xs))
	}
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	if sxx == 0 {
		return c, fmt.Errorf("train: calibration for %v: every run at one rate", target)
	}
	b := sxy / sxx
	a := my - b*mx
	c.Steps0, c.K = a, b/a
	return c, nil
}
