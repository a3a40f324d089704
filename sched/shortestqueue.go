package sched

import "math"

// NameShortestQueue is the registry name of the shortest-queue scheduler.
const NameShortestQueue = "shortestqueue"

func init() {
	Register(NameShortestQueue, func(cfg Config) (Scheduler, error) {
		if err := noOptions(NameShortestQueue, cfg); err != nil {
			return nil, err
		}
		return shortestQueue{}, nil
	})
}

// shortestQueue joins the queue that drains first: among usable rails
// (up and not full) it picks the one with the smallest
// (QueuedBytes+size)/rate, where rate is RateBps when it is known (finite,
// > 0), else NominalBps when known, ties going to the lowest index. When
// some usable rail has no known rate at all, rates are treated as equal
// for every rail and the pick is the rail with the fewest QueuedBytes.
// When no rail is usable it returns -1. It keeps no state.
type shortestQueue struct{}

func (shortestQueue) Name() string { return NameShortestQueue }

// railRate is the rail's drain rate for shortestqueue: RateBps when known,
// else NominalBps when known, else 0.
func railRate(r *RailState) float64 {
	if x := r.RateBps; x > 0 && x <= math.MaxFloat64 {
		return x
	}
	if x := r.NominalBps; x > 0 && x <= math.MaxFloat64 {
		return x
	}
	return 0
}

func (shortestQueue) Pick(now int64, size int, rails []RailState) int {
	bestTime, bestBytes := -1, -1
	var keyTime float64
	var keyBytes int64
	allRated := true
	sz := float64(size)
	for i := range rails {
		r := &rails[i]
		if !r.Usable() {
			continue
		}
		if bestBytes < 0 || r.QueuedBytes < keyBytes {
			bestBytes, keyBytes = i, r.QueuedBytes
		}
		if !allRated {
			continue
		}
		rate := railRate(r)
		if rate == 0 {
			allRated = false
			continue
		}
		t := (float64(r.QueuedBytes) + sz) / rate
		if bestTime < 0 || t < keyTime {
			bestTime, keyTime = i, t
		}
	}
	if allRated {
		return bestTime
	}
	return bestBytes
}

func (shortestQueue) Departed(now int64, rail int, size int, waited int64, rails []RailState) {}
