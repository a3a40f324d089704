package sender

// PoolGain is the weight of a new sample in a Pool's moving average.
//
// A pool takes the samples of every connection through its interface, so
// it gets more of them than one rail does, taken in more varied moments
// (a step that began while the interface still sent another connection's
// tail reads low, the next one high): it averages over more of them than
// a rail's own estimate (RateGain). Measured in the 4-host lab, pairwise
// alltoall of 1 MiB, pools of weight 1/4, 1/8, 1/16 and 1/32 (2026-12-06,
// interleaved runs): at 100/50/25 Mbit/s 1/16 gave 138-148 Mbit/s of bus
// bandwidth (9 runs) against 125-137 (1/4, 12 runs), 131-138 (1/8, 3)
// and 123-137 (1/32, 3); at 200/100/50 1/4, 1/16 and 1/32 were alike
// (5 runs each: 268-289, 239-304 and 263-301).
const PoolGain = 1.0 / 16

// Pool is one drain-rate estimate shared by the rails that leave through
// one interface of the host: the rails of a process's connections to
// different peers over one NIC. Each rail's samples (Rail.Sample) go into
// the pool, and the live transport's planner uses the pool's rate for a
// rail whose own samples are old (Lane.Rate), the rail's own otherwise.
//
// A rail's own estimate is made of its own samples only. A connection
// that a collective uses one step in a few (pairwise alltoall: one step in
// N-1) gets few, and they scatter: in the 4-host lab at 200/100/50 Mbit/s
// the rates that alltoall's plans used ranged 137-203, 57-104 and 28-47
// Mbit/s (10th to 90th percentile; true 191, 96 and 48), and a plan whose
// rates err by different amounts on different rails ends when its most
// overloaded rail does: with the true rates given instead, alltoall of
// 1 MiB ran at 270-317 Mbit/s (median 304, 8 runs) against 238-275
// (median 258) with the learned ones. The interface is the same whichever
// peer a connection goes to.
//
// The zero value is an empty pool. Like Rail it holds no lock and reads no
// clock: the caller serialises its calls and passes the time, on one clock
// for every rail of the pool.
type Pool struct {
	rate float64
	at   int64
	n    uint64
}

// Add takes a drain-rate sample of rate bits/s at now; the first sample
// is the rate, each later one moves it by PoolGain. Samples <= 0 (or NaN)
// are ignored.
func (p *Pool) Add(now int64, rate float64) {
	if !(rate > 0) {
		return
	}
	if p.n == 0 {
		p.rate, p.at = rate, now
	} else {
		p.rate += PoolGain * (rate - p.rate)
		p.at = max(p.at, now)
	}
	p.n++
}

// Rate is the pool's rate at now in bits/s, or 0 if its newest sample is
// older than RateTrust (or it has none): the rail's own estimate then
// stands.
func (p *Pool) Rate(now int64) float64 {
	if p.n == 0 || now-p.at > int64(RateTrust) {
		return 0
	}
	return p.rate
}

// Samples is the number of samples taken.
func (p *Pool) Samples() uint64 { return p.n }
