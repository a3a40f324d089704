// Package bench measures multirail connections: `multirail bench` and
// `demo` (Run: both ends in one process over emulated or loopback rails,
// built by internal/topo; TCPPath, the plain TCP side, which takes turns
// with a run, and TCPBaseline, which runs alone), `serve` and `send` (ReceiveAll,
// SendFor) and the lab bench's multirail agents.
//
// Every sender here is the one windowed send loop, SendWindow (Window
// Sends in flight, one tag each, until a deadline), and every receiver the
// one receive loop, Receive. Goodput counts payload bytes over the time
// they took: ReceiveAll measures from the first payload bytes received,
// not from the first complete message. Only the weighted scheduler is
// given the rails' nominal rates (NeedsNominal). Sampler and BinGoodput
// turn the per-rail counters Run reports into goodput over time.
package bench
