// Package netif discovers the rails between two hosts: which local
// interface, from which address, reaches which interface of the peer.
//
// It has one shell and a pure core. Local lists this host's interfaces
// (net.Interfaces, their addresses, the link speed from
// /sys/class/net/NAME/speed); everything else works on values and can be
// tested with made-up hosts.
//
// The steps, on each rank:
//
//  1. ParseFilter reads MULTIRAIL_IFNAME, in NCCL_SOCKET_IFNAME's syntax
//     (a comma list of name prefixes, "^" to exclude, "=" for exact names)
//     plus CIDRs that select addresses.
//  2. Candidates applies the filter and the default policy to Local's
//     interfaces: interfaces that are down, loopback (the caller makes
//     loopback rails itself between ranks on one host), virtual bridges and
//     container or overlay links (docker*, br-*, virbr*, lxcbr*, lxdbr*,
//     podman*, cni*, veth*, cali*, flannel*, vxlan*, cilium*, weave*,
//     kube-ipvs*, tunl*: see VirtualPrefixes) and link-local addresses are
//     skipped, unless the filter names them. Every skip carries a short
//     reason.
//  3. The ranks exchange their candidates (a Host: an identity and the
//     interfaces) during the rendezvous, and each calls Pair with itself
//     first. Interfaces of the two hosts that share a subnet become rails,
//     each interface in at most one rail of the pair (Open MPI's rule),
//     IPv4 preferred; a second local interface in a subnet already used
//     is skipped, since Linux routes by destination and both rails would
//     leave through the first NIC. Pair is symmetric: both ranks find the
//     same rails. With no shared subnet there are no rails, and the caller
//     opens one routed rail to the address the peer used for the
//     rendezvous; with the same host identity there are none either, and
//     the caller uses loopback rails.
//  4. Describe gives the line to log for the peer, the one users paste in
//     bug reports.
//
// That line looks like this:
//
//	rank 0 -> rank 1 (hostB): rail0 10.0.1.1>10.0.1.2, rail1 10.0.2.1>10.0.2.2; skipped docker0 (no peer address in 172.17.0.0/16)
//
// Rails are named by their local interface. Verifying a rail by dialling
// it, and dropping one that fails its handshake, is the caller's job.
//
// On the lab's namespace cluster, hosts have rail0, rail1, ... and a
// control interface ctl on its own subnet; ctl pairs too unless
// MULTIRAIL_IFNAME leaves it out ("rail" or "^ctl"), as Open MPI's
// btl_tcp_if_include does.
package netif
