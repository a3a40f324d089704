// Package comm holds collectives over multirail connections: a ring
// allreduce of float32 vectors, reliable or loss-tolerant.
//
// A Ring is one rank's view: a RingTransport that sends stages to the next
// rank and receives them from the previous one. Allreduce runs a
// reduce-scatter then an allgather, 2(N-1) hops: one stage per call, each
// hop one part of it, of packets of RingConfig.PacketFloats values. Over a
// reliable transport
// (ConnLink) every packet arrives and the result is the exact sum (or
// mean). Over a loss-tolerant one (StageLink, a multirail.StageConn per
// direction) the sender discards a fraction of every hop's packets, steered
// by the receiver's feedback, and the receiver fills the gaps without
// bias:
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
// packets were missing. With nothing discarded, both transports give the
// same result bit for bit. After each Allreduce the application reports
// the quality of the result with ReportQuality, which the previous rank's
// controller uses to set its discard rate.
//
// A Ring is not safe for concurrent use; each rank runs its own.
package comm
