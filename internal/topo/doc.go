// Package topo builds in-process topologies of multirail connections over
// emulated or loopback rails: the one builder behind bench, demo, train
// and the tests of other packages.
//
// Links puts an emulated link (emu.Link) in front of a listening address
// for every emu: spec, and passes loop specs through. NewPair listens on
// loopback, builds the links in front of the listener, dials over them and
// accepts: two connected *multirail.Conn in one process. NewRing joins n
// pairs into a ring (link i from rank i to rank i+1).
//
// The caller closes what it gets (Pair.Close, Ring.Close); closing the
// ends one after the other is fast, both at once takes the transport's
// close linger. Nominal rail rates (multirail.Rail.Bandwidth) reach the
// schedulers only when PairConfig.Nominal asks for them: only the
// "weighted" scheduler needs them, and others use them when given, so a
// benchmark that hands them out flatters the schedulers that read them.
package topo
