package sender

// Pool is one drain-rate estimate shared by the rails that leave through
// one interface of the host: the rails of the process's connections to
// different peers over one NIC. Each rail's samples (Rail.Sample) go into
// the pool, and the planner reads the pool's rate for each of those rails
// (Lane.Rate) instead of the rail's own.
//
// A rail's own estimate is made of its own samples only, and a connection
// that a collective uses one step in a few (pairwise alltoall: one step in
// N-1) gets few, taken while the interface was still sending the previous
// step's tail to another peer, so they scatter: in the 4-host lab at
// 200/100/50 Mbit/s the rates the plans used ranged 137-203, 57-104 and
// 28-47 Mbit/s (10th to 90th percentile), and a plan made of rates that
// err by different amounts on different rails ends when its most
// overloaded rail does. The interface is the same for every connection,
// and pooling their samples gives the estimate N-1 times the samples; with
// the true rates given instead, alltoall ran 1.2x faster still, so the
// scatter of the rates is what the steps lose.
//
// The zero value is an empty pool. Like Rail it holds no lock and reads no
// clock: the caller serialises its calls and passes the time, on one clock
// for every rail of the pool.
type Pool struct {
	rate float64
	at   int64
	n    uint64
}

// Add takes a drain-rate sample of rate bits/s at now (RateGain, as a
// rail's own average); samples <= 0 are ignored.
func (p *Pool) Add(now int64, rate float64) {
	if !(rate > 0) {
		return
	}
	smooth(&p.rate, rate)
	p.at = max(p.at, now)
	p.n++
}

// Rate is the pool's rate at now in bits/s, or 0 if it has no sample
// younger than RateTrust.
func (p *Pool) Rate(now int64) float64 {
	if p.n == 0 || now-p.at > int64(RateTrust) {
		return 0
	}
	return p.rate
}

// Samples is the number of samples taken.
func (p *Pool) Samples() uint64 { return p.n }
