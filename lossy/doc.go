// Package lossy is the loss-tolerant stack: data that tolerates loss
// (gradients in distributed training) trades a controlled fraction of its
// packets for time, with a discard rate steered by the receiver's
// feedback (JP7684261B2).
//
// Three layers, bottom up:
//
//   - package discard (lossy/discard): the pure controller that picks
//     each stage's discard rate from the receiver's feedback (the
//     patent's rule and the default "match" rule) and the seeded choice of
//     which packets to drop. No I/O, no clock.
//   - StageConn: stages of packets over a multirail.Conn, in both
//     directions. Send discards the controller's share of a stage's
//     packets (never all), Recv returns a stage with nil where packets
//     were discarded, and the receiver's feedback (the stage's period, the
//     quality of the result it helped make) flows back to the sender's
//     controller. The wire format is docs/wire.md's "Loss-tolerant
//     stages".
//   - Transpose and Ring: allreduces of float32 vectors over stages, whose
//     results stay unbiased whatever is discarded. Package comm runs them
//     for Allreduce with its LossTolerant option.
//
// # Transpose allreduce
//
// A Transpose (the allreduce comm's LossTolerant option runs) works on
// float32 vectors: each rank owns one chunk of the vector; every rank
// sends its values of each chunk straight to the chunk's owner
// (reduce-scatter), then every owner sends its result straight to every
// rank (allgather). Each peer link carries one stage of two parts per
// call, packets of Config.PacketFloats values, over StageConns (a
// communicator's share its peer connections on reserved tags). The sender discards a fraction of
// every part's packets, steered by the receiver's feedback, and the
// receiver corrects for it without bias whatever the ranks' inputs:
//
//   - discard.Select drops d of a part's n packets, every packet with
//     probability exactly d/n; the receiver sees n and d, so it knows the
//     rate R = d/n each packet was exposed to;
//   - a discarded packet removes exactly one rank's values of one packet.
//     The owner fills it with b times its own values v_o and counts one
//     that arrived as (v - R b v_o)/(1 - R): the expectation is v either
//     way, for any b fixed before the draw. Config.Fill chooses b:
//     FillShrunk (the default) estimates the b of least variance,
//     <v, v_o>/<v_o, v_o>, per peer and range of packets from the earlier
//     calls' arrived packets; FillOwn is b = 1 (a control variate, best
//     where the ranks' values are alike), FillNone b = 0 (plain
//     inverse-probability weighting, best where they are independent
//     noise);
//   - in the allgather a missing result is filled with b times N times
//     the receiver's own values (its own estimate of the sum) and one that
//     arrived is corrected the same way, so each rank's result is unbiased
//     too, though the ranks' results differ where packets went missing;
//   - with Config.ErrorFeedback a sender keeps the values it discarded
//     and adds them to the same positions for the same owner in the next
//     call, and the owner counts what arrived as it is: every contribution
//     counts once, late if it was discarded.
//
// A Ring (comm's LossTolerant with Config.Ring) is the older algorithm:
// reduce-scatter and allgather around the ring, 2(N-1) hops of one stage.
// It needs only the neighbours' connections, but a packet its reduce-scatter discards holds
// the partial sum of several ranks and the owner's own value never drops:
// on inputs that differ by rank (non-IID data) its results are biased.
//
// Over a loss-tolerant transport the ranks' results may differ where
// packets were missing. With nothing discarded, the result is the exact
// one. After each loss-tolerant Allreduce the application reports the
// quality of the result with ReportQuality (through a communicator,
// comm.Comm.ReportQuality), which the controllers of the ranks that sent
// to it use to set their discard rates. A Transpose runs over a MeshTransport (StageMesh, or
// MemMesh in memory), a Ring over a RingTransport (StageLink, ConnLink
// without discards, or MemRing); both share one chunk geometry and one
// float32 packet codec.
package lossy
