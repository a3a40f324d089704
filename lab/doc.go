// Package lab builds real multi-rail topologies on one Linux machine out of
// network namespaces, for measurements and tests that need real kernel TCP
// (and MPTCP, and Open MPI) rather than emulated rails. It needs root.
//
// Up builds two namespaces, <prefix>A (side 0, the sender) and <prefix>B
// (side 1, the receiver), joined by one veth pair per rail, named rail0,
// rail1, ... on both ends, with addresses 10.10.<rail+1>.1/24 (A) and .2
// (B). Every rail is shaped by tbf on both ends to its rate, with a burst
// of max(rate/8/250, 16000) bytes (see Burst) and a queue bound of
// Config.TBFLatency; TSO/GSO/GRO are off so tbf shapes MTU-sized frames,
// and the best TCP goodput of a rail is rate x 1448/1514 (GoodputCeiling).
// An unshaped control link ctl (10.10.99.1/.2) carries orchestration, such
// as Open MPI's out-of-band traffic. Both namespaces use Config.CC, do not
// cache TCP metrics, have rp_filter off, and run the in-kernel MPTCP path
// manager: B announces rails 1..m-1, so an MPTCP connection to rail0's
// address opens one subflow per rail. /etc/netns/<ns>/hosts resolves both
// namespace names to their control addresses (`ip netns exec` shows it as
// /etc/hosts). Plan lists every step; Up runs them and then checks that
// each rail carries a TCP connection.
//
// With Config.Hosts > 2, Up builds a cluster instead: hosts <prefix>h0..
// <prefix>h<N-1>, each with one NIC per rail (rail<k>, 10.10.<k+1>.<i+1>)
// plugged into that rail's switch, a Linux bridge br<k> in namespace
// <prefix>sw (Switch for NS, Run and Qdiscs), tbf on the host's end and on
// the switch port, a control NIC ctl (10.10.99.<i+1>) on bridge brc, MPTCP
// signal endpoints on every host, hosts files naming every host, bridge
// netfilter off in the switch namespace; Up checks every pair of hosts on
// every link, and Probe does so on demand.
//
// Up first removes whatever a crashed run with the same prefix left
// behind; Down removes everything Up built, kills processes left in the
// namespaces and takes back the one change it makes outside them (adding
// Config.CC to the init namespace's tcp_allowed_congestion_control). Labs
// with different prefixes can run side by side. State lives under
// /run/multirail-lab/<prefix>/ so that other processes can Open a lab that
// is up, and Teardown one.
//
// Run executes Go code on a thread inside a namespace, so that sockets made
// there belong to it; Command runs a program there (`ip netns exec`).
// Load runs a competing TCP stream over one rail (LoadIperf the same with
// iperf3, LoadWith either), Qdiscs reads the tbf counters, SetLink takes a
// rail down and up, Subflows reads the subflows of an MPTCP connection.
//
// What the caller must do:
//
//   - Check Available first (tests skip with its error).
//   - Call Down when done, also on errors and on SIGINT/SIGTERM; a lab left
//     up is removed by the next Up with the same prefix, or by Teardown.
//   - Create sockets inside Run's function, on its goroutine; goroutines
//     it starts do not run in the namespace.
package lab
