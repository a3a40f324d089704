// Package sched decides, segment by segment, which rail a segment of a
// message is sent on.
//
// It holds the Scheduler interface, a registry of schedulers by name
// (Register, New, Names) and the baselines against which the learning
// scheduler is measured:
//
//   - "roundrobin": Open MPI's equal striping. Rails take turns; a rail
//     that is not up is skipped, a rail that is up but full is still
//     returned, so striping drags at the slowest rail.
//   - "weighted": Open MPI's hand-tuned static shares. Each up rail gets a
//     share of the bytes proportional to Config.Bandwidths, by a
//     deterministic smooth weighted round-robin over bytes; a full rail is
//     still returned when it is its turn.
//   - "shortestqueue": join the queue that drains first, by
//     (QueuedBytes+size)/rate among usable rails.
//
// The learning schedulers, "qlearn" and "qlearn-patent", live in package
// sched/qlearn and register themselves here when it is imported. A
// scheduler may also implement DeliveryObserver (it learns from each
// segment's end-to-end delay) and Explainer (it reports its state levels
// and values, for Stats).
//
// Every scheduler is pure: no I/O, no goroutines, no clock and no global
// random source. Time comes in as the now argument (nanoseconds since an
// arbitrary origin) and randomness only from Config.Rand, so the same
// scheduler runs unchanged in unit tests, in the simulator's virtual time
// and in the live transport. Pick and Departed allocate nothing.
//
// What the caller must do:
//
//   - Serialise calls: a Scheduler is not safe for concurrent use. Call
//     Pick once per segment, and Departed whenever a segment leaves a
//     rail's queue, always from one goroutine or under one lock.
//   - Pass the current state of every rail, indexed by rail number, with
//     len(rails) equal to Config.Rails.
//   - Treat -1 from Pick as "no rail now": wait until a segment departs or
//     a rail's state changes (a rail comes up, a queue gets room), then call
//     Pick again for the same segment.
//   - Treat a full rail from Pick as a decision: queue the segment on that
//     rail once it has room (the blocking behaviour of CN101833479A and of
//     static striping); do not silently send it elsewhere. Pick never
//     returns a rail that is not up.
//   - If the scheduler implements DeliveryObserver and you can tell when
//     the peer has a segment, call Delivered once per segment, for each
//     rail in the order its segments departed.
package sched
