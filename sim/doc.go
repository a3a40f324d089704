// Package sim is a discrete-event simulator of multirail senders: it runs
// the very schedulers of package sched, unchanged, in virtual time, so
// that they can be compared on many rails, under moving background load
// and at scales (a 1024-rank ring allreduce) that no test bed offers.
//
// # Model
//
// A rail is a server of RateBps bits/s with a bounded send queue in
// front of it (QueueDepth segments) and a propagation delay after it.
// Background load takes a fraction of the rail's capacity away over time:
// steps, periodic on/off, Poisson bursts or a trace; a segment's
// transmission time integrates the available rate RateBps*(1-load(t))
// over the load changes it spans, and a rail whose capacity is all taken
// holds its segment until capacity returns.
//
// A sender has one sched.Scheduler (built by sched.New with the rails'
// rates as Config.Bandwidths) and uses it as the live transport does.
// Each message is cut into segments of SegmentSize payload plus a
// HeaderSize header; for each segment the sender calls Pick with the
// current RailState of every rail. On -1 it waits for the next departure
// or rail change and asks again; on a full rail it waits for room on that
// rail and queues the segment there without asking again; otherwise it
// queues the segment. Large messages are queued one after the other;
// messages of at most EagerLimit bytes use a second lane and slip in
// between, like the live transport's eager sends. A rail's transmitter
// takes the head of its queue as soon as it is idle (or, with a
// DispatchInterval, only the segments queued at the last tick of the
// patent's dispatch timer, which stay in the queue until taken, as in the
// transport), calls Departed with the segment's queueing delay, and
// transmits it; the segment arrives after the rail's delay. A scheduler
// that implements sched.DeliveryObserver is told of the arrival one
// propagation delay later (the transport's acknowledgement), with the
// segment's delay since it was queued. A message completes when its last
// byte arrives.
//
// RailState.RateBps is an estimate, measured as the live transport does:
// bytes transmitted over at least RateWindow of their arrival times while
// the rail stayed busy, smoothed, and 0 until the first such sample. RailState.NominalBps is
// the rail's configured rate only when Scenario.KnownBandwidths is set.
//
// Traffic is bulk (a window of back-to-back messages), mixed (weighted
// message sizes, back-to-back or Poisson arrivals at an offered load),
// reqresp (each request is answered over a reverse set of rails with the
// responder's own scheduler) or allreduce (a ring allreduce: every rank
// sends to its successor over its own rails with its own scheduler; a
// rank starts step s+1 once its step-s chunk has arrived at its successor
// and its predecessor's step-s chunk has arrived at it; 2(N-1) steps).
//
// # Scenario files
//
// A scenario file is a YAML (or JSON) mapping; testdata/example.yaml shows
// every field. Rates are bits/s ("200mbit", "1.5gbit", or a number), sizes
// bytes ("64KiB", "1MiB", or a number), times Go durations ("4ms", "1.5s")
// or plain seconds, all in the grammar of package units. Unknown fields
// are errors.
//
//	name, seed               label; seed of all randomness (default 0)
//	duration                 virtual length; a limit for finite traffic
//	segment_size             segment payload (64KiB)
//	queue_depth              send-queue capacity per rail, segments (16)
//	eager_limit              size of eager messages (16KiB; negative: none)
//	plan_min                 smallest message the planner splits (2 segments; negative: none)
//	dispatch_interval        0, or a dispatch timer of 10ms..1s
//	known_bandwidths         schedulers see rates as NominalBps (false)
//	series_bin               time-series bin width (automatic)
//	schedulers               list of names, or all (default)
//	sched_options            {name: "key=value,..."} per scheduler
//	rails: [{name, rate, delay, load: [...]}]
//	  load {kind: step, at, fraction}
//	  load {kind: onoff, period, duty, fraction, start}
//	  load {kind: poisson, gap, length, fraction, start}
//	  load {kind: trace, file | points: [[time_s, fraction], ...]}
//	traffic {kind: bulk, size, window, count}
//	traffic {kind: mixed, sizes: [{size, weight}], rate | load | window, count}
//	traffic {kind: reqresp, request, response, window, count, reverse_rails}
//	traffic {kind: allreduce, ranks, size, iterations, rails_min, rails_max, rate_jitter}
//
// A load without kind takes it from its fields (at: step, period: onoff,
// gap: poisson, file or points: trace). The Scenario type documents what
// each field means.
//
// # Use
//
// Describe a scenario as a Scenario value, or parse one from YAML or JSON
// with ParseScenario or LoadScenario (errors read "FILE:LINE: reason"; see
// testdata/example.yaml for every field), or take a built-in one with
// Builtin (BuiltinNames lists them). Then call Run with a scheduler name,
// or New and Step for control over progress, and read the Result.
//
// The package is pure in the sense of the rest of the module: virtual
// time, randomness only from math/rand/v2 sources seeded from
// Scenario.Seed, no goroutines, no clock and no logging; LoadScenario is
// its only I/O. The same scenario and seed therefore give the same
// Result, bit for bit. What the caller must do:
//
//   - Use a Sim from one goroutine at a time; distinct Sims (say, one per
//     scheduler) may run in parallel, and may share a Scenario, which
//     New does not modify.
//   - Treat Scenario values as plain data: set them up, then Validate (New
//     does), and do not change a Scenario while a New is running on it.
//   - Expect the simulator to trust schedulers as the live transport does,
//     except that a scheduler declining every rail while nothing is in
//     flight (which would wait forever) gets its segment placed on the
//     first usable rail, counted in Result.ForcedPicks.
//
// The hot path allocates nothing once its pools have grown; BenchmarkSim
// reports simulated events per second.
package sim
