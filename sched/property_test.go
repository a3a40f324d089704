package sched

import (
	"math"
	"testing"

	"pgregory.net/rapid"
)

// genRate draws a rate estimate: often unknown (0), sometimes garbage
// (negative, NaN, +Inf), otherwise 1 Mb/s to 100 Gb/s.
func genRate(t *rapid.T, label string) float64 {
	switch rapid.IntRange(0, 5).Draw(t, label+"Kind") {
	case 0:
		return 0
	case 1:
		return rapid.SampledFrom([]float64{-1e8, math.NaN(), math.Inf(1), math.Inf(-1)}).Draw(t, label+"Bad")
	default:
		return rapid.Float64Range(1e6, 1e11).Draw(t, label)
	}
}

func genRail(t *rapid.T) RailState {
	capacity := rapid.IntRange(0, 16).Draw(t, "cap")
	queued := rapid.IntRange(0, capacity+1).Draw(t, "queued")
	return RailState{
		Up:          rapid.Float64Range(0, 1).Draw(t, "upDraw") < 0.75,
		Queued:      queued,
		QueuedBytes: rapid.Int64Range(0, int64(queued)*seg).Draw(t, "queuedBytes"),
		QueueCap:    capacity,
		LastWait:    rapid.Int64Range(0, 1e9).Draw(t, "lastWait"),
		SegmentTime: rapid.Int64Range(0, 1e8).Draw(t, "segTime"),
		RateBps:     genRate(t, "rate"),
		NominalBps:  genRate(t, "nominal"),
	}
}

func genRails(t *rapid.T, n int) []RailState {
	return rapid.SliceOfN(rapid.Custom(genRail), n, n).Draw(t, "rails")
}

func genBandwidths(t *rapid.T, n int) []float64 {
	return rapid.SliceOfN(rapid.Float64Range(1e3, 1e12), n, n).Draw(t, "bandwidths")
}

// refShortestQueue is the plain reference for shortestqueue: the rate of a
// rail is the first finite positive of RateBps, NominalBps; if every usable
// rail has one, minimise (QueuedBytes+size)/rate, else minimise QueuedBytes;
// ties to the lowest index; -1 when nothing is usable.
func refShortestQueue(size int, rails []RailState) int {
	ok := func(x float64) bool { return x > 0 && !math.IsInf(x, 0) && !math.IsNaN(x) }
	rate := func(r RailState) float64 {
		if ok(r.RateBps) {
			return r.RateBps
		}
		if ok(r.NominalBps) {
			return r.NominalBps
		}
		return 0
	}
	var usable []int
	allRated := true
	for i, r := range rails {
		if r.Up && r.Queued < r.QueueCap {
			usable = append(usable, i)
			allRated = allRated && rate(r) > 0
		}
	}
	best := -1
	for _, i := range usable {
		if best < 0 {
			best = i
			continue
		}
		if allRated {
			ki := (float64(rails[i].QueuedBytes) + float64(size)) / rate(rails[i])
			kb := (float64(rails[best].QueuedBytes) + float64(size)) / rate(rails[best])
			if ki < kb {
				best = i
			}
		} else if rails[i].QueuedBytes < rails[best].QueuedBytes {
			best = i
		}
	}
	return best
}

// TestPropertyPicks: for random sequences of random rail states, no
// scheduler ever picks a rail that is not up or out of range, and none
// returns -1 while some rail is usable. Schedulers that return full rails
// (roundrobin, weighted) return -1 only when no rail is up; shortestqueue
// only returns usable rails and matches the reference.
func TestPropertyPicks(t *testing.T) {
	for _, name := range allNames {
		t.Run(name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				n := rapid.IntRange(1, 8).Draw(t, "n")
				s, err := New(name, Config{Rails: n, Bandwidths: genBandwidths(t, n)})
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				steps := rapid.IntRange(1, 20).Draw(t, "steps")
				for step := range steps {
					rails := genRails(t, n)
					size := rapid.IntRange(0, 2*seg).Draw(t, "size")
					anyUp, anyUsable := false, false
					for i := range rails {
						anyUp = anyUp || rails[i].Up
						anyUsable = anyUsable || rails[i].Usable()
					}
					got := s.Pick(int64(step), size, rails)
					if got < -1 || got >= n {
						t.Fatalf("step %d: pick %d out of range [-1, %d)", step, got, n)
					}
					if got >= 0 && !rails[got].Up {
						t.Fatalf("step %d: picked rail %d which is not up: %+v", step, got, rails)
					}
					if got == -1 && anyUsable {
						t.Fatalf("step %d: -1 while a rail is usable: %+v", step, rails)
					}
					switch name {
					case NameShortestQueue:
						if got >= 0 && !rails[got].Usable() {
							t.Fatalf("step %d: picked rail %d which is full: %+v", step, got, rails)
						}
						if want := refShortestQueue(size, rails); got != want {
							t.Fatalf("step %d: pick %d, reference %d (size %d): %+v", step, got, want, size, rails)
						}
					default:
						if (got == -1) != !anyUp {
							t.Fatalf("step %d: pick %d, some rail up = %v: %+v", step, got, anyUp, rails)
						}
					}
					if got >= 0 {
						s.Departed(int64(step), got, size, 1, rails)
					}
				}
			})
		})
	}
}

// TestPropertyRoundRobinFair: with a fixed set of up rails, every up rail is
// picked exactly once in each window of (number of up rails) picks.
func TestPropertyRoundRobinFair(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 8).Draw(t, "n")
		rails := genRails(t, n)
		upCount := 0
		for _, r := range rails {
			if r.Up {
				upCount++
			}
		}
		if upCount == 0 {
			return
		}
		s, err := New(NameRoundRobin, Config{Rails: n})
		if err != nil {
			t.Fatal(err)
		}
		skip := rapid.IntRange(0, 10).Draw(t, "skip")
		for range skip {
			s.Pick(0, seg, rails)
		}
		seen := make([]int, n)
		for range upCount * 3 {
			seen[s.Pick(0, seg, rails)]++
		}
		for i, r := range rails {
			if want := map[bool]int{true: 3, false: 0}[r.Up]; seen[i] != want {
				t.Fatalf("rail %d (up %v) picked %d times in %d picks, want %d", i, r.Up, seen[i], upCount*3, want)
			}
		}
	})
}

// TestPropertyWeightedShares: with a fixed set of up rails, random
// bandwidths and random segment sizes, each up rail's byte share stays
// within a few segments of its bandwidth share at every point in time.
func TestPropertyWeightedShares(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 8).Draw(t, "n")
		bw := genBandwidths(t, n)
		rails := genRails(t, n)
		var total float64
		for i := range rails {
			if rails[i].Up {
				total += bw[i]
			}
		}
		if total == 0 {
			return
		}
		s, err := New(NameWeighted, Config{Rails: n, Bandwidths: bw})
		if err != nil {
			t.Fatal(err)
		}
		sent := make([]float64, n)
		var all float64
		steps := rapid.IntRange(1, 300).Draw(t, "steps")
		for step := range steps {
			size := rapid.IntRange(1, seg).Draw(t, "size")
			r := s.Pick(int64(step), size, rails)
			sent[r] += float64(size)
			all += float64(size)
			for i := range rails {
				if !rails[i].Up {
					continue
				}
				// Smooth weighted round-robin keeps each rail within n
				// maximum-size segments of its exact share.
				if d := math.Abs(sent[i] - all*bw[i]/total); d > float64(n*seg) {
					t.Fatalf("step %d: rail %d sent %v bytes, exact share %v (off by %v)", step, i, sent[i], all*bw[i]/total, d)
				}
			}
		}
	})
}
