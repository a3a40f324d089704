// Package qlearn holds the learning segment schedulers: the preset of
// CN101833479A as reconstructed in docs/scheduler.md ("qlearn-patent") and
// an improved preset ("qlearn", the transport's default). Importing the
// package registers both in the sched registry; the root package and the
// simulator import it.
//
// The patent preset keeps one Q table per pair of rails over the rails'
// state levels (from queue count and wait time), acts greedily on their
// sum, updates every pair table SARSA-style with the reward
// 1/(wait_time+1) - 4/k, starts with a random rail and waits while the
// chosen queue is full.
//
// The improved preset learns, per rail and queue level, the expected delay
// of a segment from the segment's own measured delay (to the peer's
// confirmation when the caller reports deliveries through
// sched.DeliveryObserver), sends each segment where that delay is
// smallest, waits for a full rail only when that is clearly faster, and
// explores with a decaying probability. It needs no configured bandwidth.
//
// Both are pure (no I/O, goroutines, clock or global random source) and
// allocate nothing per decision. What the caller must do is what package
// sched says: serialise calls, call Pick once per segment and Departed
// when a segment leaves a rail's queue, in queue order. For the improved
// preset, also call Delivered (sched.DeliveryObserver) once per segment,
// per rail in departure order, when the peer has it; without it the
// preset learns from queueing delays and measured rates instead.
//
// Every constant is a field of Config (zero value = the preset's default,
// Defaults lists them); New builds a preset with custom constants, and
// ParseOptions reads them from "key=value,..." as sched.Config.Options,
// multirail.Config.SchedulerOptions and the CLI's --sched-opt do.
package qlearn
