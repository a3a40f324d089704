// Package osu is the OSU micro-benchmarks' method (osu_latency, osu_bw,
// osu_bibw and the collective tests) over a communicator (package comm):
// the timing loops, the iteration counts by size, nccl-tests' bus
// bandwidth for the collectives, and --validate's closed forms, so that
// its results can be set beside published OSU tables.
//
// The caller starts the communicator (comm.Init, under any launcher),
// picks a Test (Find, Names), fills a Plan and calls Run on every rank
// with the same plan. Rank 0 gets the Report (its Results, one per size,
// come through RunOptions.Result as they are measured); the other ranks
// only take part. A rank whose results are wrong with Plan.Validate makes
// every rank's Run fail with a *ValidationError. The package never
// prints.
package osu
