//go:build linux

package lab

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Subflow is one TCP subflow of an MPTCP connection.
type Subflow struct {
	Local, Remote netip.AddrPort
	// BytesAcked and BytesReceived are the subflow's tcp_info counters
	// (tcpi_bytes_acked, tcpi_bytes_received).
	BytesAcked, BytesReceived uint64
}

// getsockopt levels and names of linux/mptcp.h.
const (
	mptcpTCPInfo      = 2 // MPTCP_TCPINFO: struct tcp_info per subflow
	mptcpSubflowAddrs = 3 // MPTCP_SUBFLOW_ADDRS: struct mptcp_subflow_addrs per subflow
	subflowDataHeader = 16
	subflowAddrsSize  = 256 // two struct __kernel_sockaddr_storage
	tcpInfoSize       = 232
)

// Subflows lists the subflows of an MPTCP connection with their byte
// counters; an error when c is not MPTCP (a plain TCP connection, or one
// that fell back).
func Subflows(c *net.TCPConn) ([]Subflow, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var infos, addrs []byte
	var n1, n2 int
	var serr error
	err = raw.Control(func(fd uintptr) {
		infos, n1, serr = subflowOpt(int(fd), mptcpTCPInfo, tcpInfoSize)
		if serr != nil {
			return
		}
		addrs, n2, serr = subflowOpt(int(fd), mptcpSubflowAddrs, subflowAddrsSize)
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return nil, fmt.Errorf("lab: MPTCP subflows: %w", err)
	}
	ne := binary.NativeEndian
	out := make([]Subflow, min(n1, n2))
	for i := range out {
		ti := infos[i*tcpInfoSize:]
		out[i].BytesAcked = ne.Uint64(ti[120:])
		out[i].BytesReceived = ne.Uint64(ti[128:])
		a := addrs[i*subflowAddrsSize:]
		out[i].Local = sockaddr(a[:128])
		out[i].Remote = sockaddr(a[128:256])
	}
	return out, nil
}

// subflowOpt reads one of the per-subflow MPTCP socket options, each
// element elem bytes, and returns the elements and their count.
func subflowOpt(fd, opt, elem int) ([]byte, int, error) {
	const maxSubflows = 16
	buf := make([]byte, subflowDataHeader+maxSubflows*elem)
	ne := binary.NativeEndian
	ne.PutUint32(buf[0:], subflowDataHeader) // size_subflow_data
	ne.PutUint32(buf[12:], uint32(elem))     // size_user
	l := uint32(len(buf))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_MPTCP, uintptr(opt),
		uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return nil, 0, e
	}
	n := int(ne.Uint32(buf[4:])) // num_subflows
	n = min(n, (int(l)-subflowDataHeader)/elem, maxSubflows)
	return buf[subflowDataHeader:], max(n, 0), nil
}

// sockaddr decodes a struct sockaddr_in or sockaddr_in6.
func sockaddr(b []byte) netip.AddrPort {
	fam := binary.NativeEndian.Uint16(b)
	port := binary.BigEndian.Uint16(b[2:])
	switch fam {
	case unix.AF_INET:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port)
	case unix.AF_INET6:
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])), port)
	}
	return netip.AddrPort{}
}
