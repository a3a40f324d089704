// Package sender is the pure per-rail sender core shared by the live
// transport (the root package's Conn) and the simulator (package sim).
//
// A Rail holds what a sender knows of one rail: its send queue (segments
// the scheduler assigned to it), the segments in flight (written but not
// yet acknowledged, or for the simulator: in transmission), the release
// count of the dispatch timer, and the estimators the schedulers read
// through sched.RailState: the drain rate (bytes acknowledged over windows
// of at least Config.RateWindow while the rail had a backlog, and short
// flights that took no such sample, each smoothed with weight RateGain),
// the smoothed ACK delay, the last queue wait, and the
// stall test. When the acknowledgements carry the peer's arrival times
// (AckArrived), it also keeps the drain rate timed by them (ArrivalRate),
// which a queue on the way back does not distort, and the forward delay
// (one way, above its recent minimum). Credit is the peer's flow-control
// window. A Pool is one drain-rate estimate that several rails' samples
// (Rail.Sample) feed: the live transport keeps one per local interface,
// for the planner (see Pool).
//
// Everything here is decision logic: time is passed in (nanoseconds on
// the caller's clock), there are no locks, goroutines or I/O. The live
// transport calls a Rail under its connection lock; the simulator calls it
// from its event loop. Both thus feed their schedulers from the same code,
// which is what makes the simulator's figures comparable with live ones.
package sender
