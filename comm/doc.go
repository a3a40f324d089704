// Package comm is an MPI-style communicator over multirail connections:
// N ranks, started by the launcher a job already has, with point-to-point
// messages, collectives and a loss-tolerant allreduce.
//
// # Starting
//
// Init detects the launcher from the environment (multirail run,
// torchrun, env://, Open MPI's mpirun, MPICH's Hydra, Slurm's srun, a
// Kubernetes Indexed Job; package launch), meets the other ranks at the
// rendezvous (package rdzv: served by rank 0 or by multirail run,
// authenticated with the token, or a file:// directory), pairs this
// host's NICs with every other rank's by shared subnet (package netif;
// MULTIRAIL_IFNAME selects them in NCCL's syntax), connects to every
// other rank with one multirail connection over all the rails of that
// pair, and returns the world communicator once every rank is connected.
// Each rank logs one line per peer naming its rails and what was skipped.
// Start does the same with the launcher's information given; NewLocal
// starts N ranks inside one process (tests, examples).
//
// # Point to point
//
// Send, Recv, Probe, Sendrecv and RecvInto block (each takes a context);
// Isend and Irecv return a Request (Wait, Test, Done, WaitAll, WaitAny).
// Tags are 0..MaxTag; AnySource and AnyTag match anything. Messages from
// one source with one tag arrive in send order; with a wildcard, in
// arrival order. Unmatched messages are bounded per peer
// (Config.MaxUnmatched): past the bound the peer is held back by the
// transport's flow control, and nothing is dropped.
//
// # Collectives
//
// Barrier and the generic Bcast, Reduce, Allreduce, Allgather,
// ReduceScatter, Alltoall, Gather and Scatter over float32, float64, int32
// and int64 with Sum, Prod, Min, Max (and Mean for floats). Every rank
// calls them in the same order. The algorithm is chosen by size
// (recursive doubling, binomial trees and Bruck for small messages; ring,
// pairwise and scatter-allgather for large ones; docs/comm.md has the
// table); WithAlgo or Config.Algorithms forces one. A collective whose
// ranks disagree (count, root, type, op, algorithm), or whose peer
// failed, fails on every rank with a *PeerError naming the rank and the
// operation instead of hanging; the communicator's later collectives fail
// with it too.
//
// # Loss-tolerant allreduce
//
// Allreduce of float32 with the LossTolerant option runs a Ring: a
// reduce-scatter then an allgather, 2(N-1) hops, each one part of a stage
// of packets of RingConfig.PacketFloats values, sent over
// multirail.StageConns that share the peer connections (reserved tags).
// The sender discards a fraction of every hop's packets, steered by the
// receiver's feedback, and the receiver fills the gaps without bias:
//
//   - every packet carries how many ranks' contributions its values sum;
//     a missing partial sum in the reduce-scatter leaves only the
//     receiver's own contribution, and the owner of a chunk divides by the
//     count that arrived (Mean) or rescales by N/count (Sum);
//   - a packet missing in the allgather is filled with the partial sum
//     the receiver made of it in the reduce-scatter (its own contribution
//     and those that reached it), divided or rescaled by its count: when
//     the ranks' inputs are unbiased estimates of the same quantity (as
//     data-parallel gradients are), so is the result;
//   - with RingConfig.ErrorFeedback, a sender keeps the reduce-scatter
//     packets it discarded and adds them, values and counts, to the same
//     positions of the same hop in the next Allreduce, and the owner of a
//     chunk divides by N rather than by what arrived: every contribution
//     counts once, late if it was discarded.
//
// Over a loss-tolerant transport the ranks' results may differ where
// packets were missing. With nothing discarded, the result is the exact
// one. After each loss-tolerant Allreduce the application reports the
// quality of the result with Comm.ReportQuality (Ring.ReportQuality), which
// the previous rank's controller uses to set its discard rate. A Ring can
// also run on its own over a RingTransport: StageLink, ConnLink or MemRing.
//
// # What the caller must do
//
//   - Close the world communicator (it closes the connections); Close
//     communicators from Split when done with them.
//   - Call collectives in the same order on every rank, one at a time per
//     communicator. Not modify a buffer passed to Isend before the request
//     completes.
//   - Give every rank the same token (Config.Transport.Token or
//     MULTIRAIL_TOKEN; multirail run generates one).
//
// A Ring is not safe for concurrent use; a Comm is, within the rules above.
package comm
