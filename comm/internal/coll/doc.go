// Package coll implements the algorithms of MPI-style collectives —
// barrier, broadcast, reduce, allreduce, allgather, reduce-scatter,
// all-to-all, gather and scatter — over a minimal point-to-point
// Transport, following Thakur, Rabenseifner and Gropp, "Optimization of
// collective communication operations in MPICH" (2005), and Open MPI's
// tuned module. The communicator in package comm wraps it; this package
// knows nothing of connections, rails or call identifiers.
//
// # Transport contract
//
// A Transport is one rank's view of one call: Rank, Size, Send(dst, step,
// b) and Recv(src, step). A message is identified by (src, dst, step); an
// algorithm uses each triple at most once per call, with non-negative
// steps (the pipelined algorithms number the pieces between a pair of
// ranks in order, so steps grow with the vector). Send may return as soon as the
// transport holds the bytes (it need not wait for the matching Recv) and
// must not keep b; Recv returns a fresh buffer. Both must honour ctx. The
// collectives call Send and Recv from several goroutines at once (a send
// and a receive of the same round run concurrently; linear algorithms post
// all their messages at once) and never leave a goroutine behind: a call
// returns only when every Send and Recv it started has returned. The first
// error of a call (of the transport, or ctx's) cancels its other
// operations and is returned wrapped as "coll: <collective> <algorithm>:
// ...", so errors.Is finds the transport's or ctx's error. A call under a
// context that is already done returns its error without communicating. A
// rank whose peer fails or never calls blocks until its context ends:
// aborting the other ranks is the communicator's job.
//
// Every rank must pass the same algorithm, root, op, and lengths (Auto
// resolves identically everywhere because Choose sees the same sizes).
// Argument errors found locally are returned before any communication; a
// length that differs between ranks is reported by the receiving rank
// when a message has the wrong size. Send and receive buffers must not
// overlap.
//
// Elements travel little-endian: on little-endian hosts buffers are sent
// as they are in memory and received messages are used in place when
// aligned (copied otherwise); other hosts encode element by element.
//
// # Algorithms
//
// N is the number of ranks, p the largest power of two <= N, n the
// message size as Choose measures it (see there), "rounds" the number of
// sequential communication steps (the latency term) and "volume" what the
// busiest rank sends. Algorithms marked (fold) handle N that is not a
// power of two as MPICH does: of the first 2(N-p) ranks the odd ones hand
// their data to the even one below them (one extra round), the p remaining
// ranks run the algorithm, and the even ranks hand the odd ones their
// result (one more round). Auto runs Choose's pick with the default
// Thresholds (MPICH's, placeholders to be re-measured on multirail).
//
//	collective      algorithm           rounds             volume              chosen when
//	barrier         dissemination       ceil(log2 N)       0                   always
//	                recursive-doubling  log2 p (fold)      0                   never
//	bcast           binomial            ceil(log2 N)       n·ceil(log2 N)      n < 12 KiB or N < 8
//	                scatter-allgather   ceil(log2 N)+N-1   ~2n                 otherwise
//	                linear              1                  n(N-1) at root      never
//	reduce          binomial            ceil(log2 N)       n                   n <= 2 KiB
//	                rabenseifner        2 log2 p (fold)    ~2n (+n folded)     otherwise
//	allreduce       recursive-doubling  log2 p (fold)      n·log2 p            n <= 2 KiB
//	                rabenseifner        2 log2 p (fold)    ~2n (+n folded)     n <= 512 KiB
//	                ring                2(N-1)             2n(N-1)/N           otherwise
//	allgather       recursive-doubling  log2 p (fold)      n(N-1)              N·n < 512 KiB, N a power of two
//	                bruck               ceil(log2 N)       n(N-1)              N·n < 80 KiB
//	                ring                N-1                n(N-1)              otherwise
//	reduce-scatter  recursive-halving   log2 p (fold)      ~n (+n folded)      n < 512 KiB
//	                pairwise            N-1                n(N-1)/N            otherwise
//	                ring                N-1                n(N-1)/N            never (neighbours only)
//	alltoall        bruck               ceil(log2 N)       ~n·N/2·log2 N       n <= 256 B and N >= 8
//	                linear              1 (all posted)     n(N-1)              n <= 32 KiB
//	                pairwise            N-1                n(N-1)              otherwise
//	gather/scatter  binomial            ceil(log2 N)       n(N-1) at root      n < 8 KiB
//	                linear              1 (all posted)     n(N-1) at root      otherwise
//
// Details: bcast scatter-allgather is van de Geijn's binomial scatter of N
// blocks followed by a ring allgather. Reduce rabenseifner reduce-scatters
// by recursive halving and gathers the blocks to the root along the
// halving tree (if the root was folded away, its even neighbour forwards
// the result). Allreduce rabenseifner is recursive halving followed by a
// recursive-doubling allgather; ring is a ring reduce-scatter followed by
// a ring allgather. Reduce-scatter recursive-halving folds with each even
// rank standing for its odd neighbour's block too. Alltoall pairwise pairs
// r with r XOR i when N is a power of two, else sends to r+i and receives
// from r-i. Blocks are split as evenly as possible (block i of a count-
// element vector cut in m parts is [i*count/m, (i+1)*count/m)), so every
// algorithm takes any count, including 0 and counts below N, and any root.
//
// # Pipelined steps
//
// The algorithms whose steps move ranges of one vector — allreduce
// rabenseifner and ring, reduce rabenseifner, reduce-scatter
// recursive-halving and ring, allgather recursive-doubling and ring, and
// bcast scatter-allgather's ring — are written as plans (pipe.go): every
// range a step sends or receives is cut into pieces, a piece goes out as
// soon as the pieces received earlier that wrote its elements have been
// handled (reduced or copied), each send in its own goroutine, without
// waiting for the rest of its step or for earlier sends to complete. No
// step waits for a whole range to land, the folds of non-power-of-two
// sizes included. Received pieces are handled one at a time in the plan's
// order, so every element is reduced in the same order as with one
// message per step: the results are bit for bit those of the unpipelined
// algorithm (TestPipelinedBitIdentical).
//
// Pieces fill segments: a Transport that is a Framer says how it carries a
// message (segments of Framing.Segment bytes, after a header of
// Framing.Overhead bytes; the communicator gives its transport's frames
// and its own header); a full piece is PieceElems elements, whole
// segments less the header (at most MaxPiece, fewer segments for blocks
// shorter than that), so no full piece spills its last bytes into a
// segment of their own. A range's remainder shorter than a segment rides
// in its last piece (it would cost a segment as a piece of its own too,
// and a message more).
//
// # Floating-point results
//
// Floating-point reduction is not associative, so the result depends on
// the order in which the ranks' values are combined, which depends on the
// algorithm and N (and, through Auto, on the message size and thresholds).
// It never depends on timing: every algorithm combines values in an order
// fixed by (algorithm, N, count, root), never in arrival order, so a rerun
// gives the same bits.
//
// Allreduce gives every rank a bit-identical result with all three
// algorithms. With recursive-doubling the two partners of each round
// combine the same two partial results, and IEEE 754 addition and
// multiplication and Go's min and max are commutative; with rabenseifner
// and ring each element is reduced once, by the rank that owns its block,
// and then copied; folded ranks receive a copy. TestBitIdentical checks
// this with random non-integer float32 and float64 values (including -0)
// for N = 1..17, every op and several counts. The exception is NaN: when
// both operands are NaNs the hardware may propagate either payload, so
// ranks agree that an element is NaN but maybe not on its bits.
//
// Bcast, Allgather, Gather, Scatter and Alltoall only copy, so they are
// exact. The ranks' results of Allreduce are generally not bit-identical
// to Reduce's, to another algorithm's, or to a sequential sum in rank
// order. Integer reductions wrap on overflow and are exact in any order.
package coll
