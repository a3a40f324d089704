package coll

// Thresholds are the message sizes, in bytes, at which Choose switches
// algorithm. A zero field takes its value from DefaultThresholds, so the
// zero Thresholds is the defaults; a negative size threshold means no
// message is that small (the larger-message algorithm is always chosen).
//
// What "bytes" measures differs per collective, as in MPICH: see Choose.
//
// The defaults are MPICH's (and, for gather and scatter, close to Open
// MPI's tuned module). They are placeholders: they were measured on
// other networks, and should be re-measured on multirail transports.
type Thresholds struct {
	// Bcast: binomial below BcastShort bytes or with fewer than
	// BcastMinProcs ranks, scatter-allgather otherwise.
	BcastShort    int
	BcastMinProcs int
	// Reduce: binomial up to ReduceShort bytes, rabenseifner above.
	ReduceShort int
	// Allreduce: recursive-doubling up to AllreduceShort bytes,
	// rabenseifner up to AllreduceLong, ring above.
	AllreduceShort int
	AllreduceLong  int
	// Allgather, on the total gathered size (bytes × ranks):
	// recursive-doubling below AllgatherLong when the number of ranks is a
	// power of two, else bruck below AllgatherShort, else ring.
	AllgatherShort int
	AllgatherLong  int
	// ReduceScatter, on the whole input vector: recursive-halving below
	// ReduceScatterLong bytes, pairwise from there.
	ReduceScatterLong int
	// Alltoall, on the block sent to each rank: bruck up to AlltoallShort
	// bytes with at least AlltoallMinProcs ranks, else linear up to
	// AlltoallMedium, else pairwise.
	AlltoallShort    int
	AlltoallMedium   int
	AlltoallMinProcs int
	// Gather and Scatter, on one rank's block: binomial below
	// GatherLong (ScatterLong) bytes, linear from there.
	GatherLong  int
	ScatterLong int
}

// DefaultThresholds returns the thresholds a zero Thresholds stands for.
func DefaultThresholds() Thresholds {
	return Thresholds{
		BcastShort:        12 << 10,
		BcastMinProcs:     8,
		ReduceShort:       2 << 10,
		AllreduceShort:    2 << 10,
		AllreduceLong:     512 << 10,
		AllgatherShort:    80 << 10,
		AllgatherLong:     512 << 10,
		ReduceScatterLong: 512 << 10,
		AlltoallShort:     256,
		AlltoallMedium:    32 << 10,
		AlltoallMinProcs:  8,
		GatherLong:        8 << 10,
		ScatterLong:       8 << 10,
	}
}

// withDefaults fills th's zero fields from DefaultThresholds.
func (th Thresholds) withDefaults() Thresholds { return th.Or(DefaultThresholds()) }

// Or returns th with its zero fields taken from d.
func (th Thresholds) Or(d Thresholds) Thresholds {
	fill := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	fill(&th.BcastShort, d.BcastShort)
	fill(&th.BcastMinProcs, d.BcastMinProcs)
	fill(&th.ReduceShort, d.ReduceShort)
	fill(&th.AllreduceShort, d.AllreduceShort)
	fill(&th.AllreduceLong, d.AllreduceLong)
	fill(&th.AllgatherShort, d.AllgatherShort)
	fill(&th.AllgatherLong, d.AllgatherLong)
	fill(&th.ReduceScatterLong, d.ReduceScatterLong)
	fill(&th.AlltoallShort, d.AlltoallShort)
	fill(&th.AlltoallMedium, d.AlltoallMedium)
	fill(&th.AlltoallMinProcs, d.AlltoallMinProcs)
	fill(&th.GatherLong, d.GatherLong)
	fill(&th.ScatterLong, d.ScatterLong)
	return th
}

// Choose returns the algorithm Auto runs for collective c over size ranks
// with thresholds th. bytes is the message size as MPICH measures it, the
// same on every rank:
//
//   - Barrier: ignored;
//   - Bcast: the buffer;
//   - Reduce, Allreduce: the vector reduced;
//   - ReduceScatter: the whole input vector (len(send) elements);
//   - Allgather, Gather: one rank's contribution (len(send) elements);
//   - Scatter: one rank's block (len(recv) elements);
//   - Alltoall: the block sent to each rank (len(send)/size elements).
//
// It returns Auto for an unknown collective.
func Choose(c Collective, size, bytes int, th Thresholds) Algo {
	th = th.withDefaults()
	switch c {
	case CollBarrier:
		return Dissemination
	case CollBcast:
		if bytes < th.BcastShort || size < th.BcastMinProcs {
			return Binomial
		}
		return ScatterAllgather
	case CollReduce:
		if bytes <= th.ReduceShort {
			return Binomial
		}
		return Rabenseifner
	case CollAllreduce:
		switch {
		case bytes <= th.AllreduceShort:
			return RecursiveDoubling
		case bytes <= th.AllreduceLong:
			return Rabenseifner
		}
		return Ring
	case CollAllgather:
		total := bytes * size
		switch {
		case total < th.AllgatherLong && isPow2(size):
			return RecursiveDoubling
		case total < th.AllgatherShort:
			return Bruck
		}
		return Ring
	case CollReduceScatter:
		if bytes < th.ReduceScatterLong {
			return RecursiveHalving
		}
		return Pairwise
	case CollAlltoall:
		switch {
		case bytes <= th.AlltoallShort && size >= th.AlltoallMinProcs:
			return Bruck
		case bytes <= th.AlltoallMedium:
			return Linear
		}
		return Pairwise
	case CollGather:
		if bytes < th.GatherLong {
			return Binomial
		}
		return Linear
	case CollScatter:
		if bytes < th.ScatterLong {
			return Binomial
		}
		return Linear
	case CollAlltoallv:
		return Pairwise
	}
	return Auto
}

func isPow2(n int) bool { return n > 0 && n&(n-1) == 0 }
