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
// Programs that already exchange small blobs between ranks start in two
// steps instead (NCCL's GetUniqueId/CommInitRank shape): Prepare listens
// and returns a Pending whose Card describes the rank; the program gives
// every rank every rank's card (MPI_Allgather, a shared file) and each
// calls Connect. StartStore does both steps through a key-value store
// such as torch.distributed's c10d store (rank 0 draws the token into it
// when none is set: the store is then the trust boundary).
//
// # Point to point
//
// Send, Recv, Probe, Sendrecv and RecvInto block (each takes a context);
// Isend and Irecv return a Request (Wait, Test, Done, Cancel, WaitAll, WaitAny).
// Tags are 0..MaxTag; AnySource and AnyTag match anything. Messages from
// one source with one tag arrive in send order; with a wildcard, in
// arrival order. Unmatched messages are bounded per peer
// (Config.MaxUnmatched): past the bound the peer is held back by the
// transport's flow control, and nothing is dropped.
//
// # Collectives
//
// Barrier and the generic Bcast, Reduce, Allreduce, Allgather,
// ReduceScatter, Alltoall, Alltoallv (a count per pair of ranks), Gather
// and Scatter over float32, float64, int32, int64, int8 and uint8 with
// Sum, Mean, Prod, Min, Max and, for integers, Band, Bor and Bxor. The
// ...Bytes forms (AllreduceBytes and the others) take raw memory and a
// DType, which adds bool, float16 and bfloat16 (16-bit floats are reduced
// through float32). Every rank calls them in the same order. The algorithm is chosen by size
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
// Allreduce of float32 with the LossTolerant option runs package lossy's
// Transpose (or, with lossy.Config.Ring, its older Ring) over
// lossy.StageConns that share the peer connections on reserved tags, one
// per peer and communicator stream: the sender discards a fraction of
// every stage's packets, steered by the receiver's feedback, and the
// receiver corrects for it without bias whatever the ranks' inputs (see
// package lossy for the algorithm and its estimator). The communicator
// only wires it: the stage connections (Config.Stage is their template),
// the tags, one reducer per stream, failures of other ranks interrupting
// a call.
//
// WithStream keys all of this state (controllers, residuals, the stages
// a quality report is for) by a stream id, so that independent sequences
// of calls on one communicator, such as the buckets of a DDP model, never
// share or reset each other's (ReportQualityStream, LossyStatsStream).
//
// Over a loss-tolerant transport the ranks' results may differ where
// packets were missing. With nothing discarded, the result is the exact
// one. After each loss-tolerant Allreduce the application reports the
// quality of the result with Comm.ReportQuality, which the controllers of
// the ranks that sent to it use to set their discard rates.
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
// Group makes a communicator of some ranks without any communication
// (only the members call it, with the same ranks and key); Split is the
// collective way (every rank calls it).
//
// A Ring is not safe for concurrent use; a Comm is, within the rules above.
package comm
