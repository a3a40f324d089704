//go:build linux

package lab

import (
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Qdisc is the counters of one root qdisc (on a rail: its tbf).
type Qdisc struct {
	Dev        string `json:"dev"`
	Kind       string `json:"kind"`
	Bytes      uint64 `json:"bytes"` // bytes sent, Ethernet frames included
	Packets    uint64 `json:"packets"`
	Drops      uint32 `json:"drops"`
	Overlimits uint32 `json:"overlimits"`
	Requeues   uint32 `json:"requeues"`
	Backlog    uint32 `json:"backlog"` // bytes queued now
	Qlen       uint32 `json:"qlen"`    // packets queued now
}

// QdiscReader reads the root qdiscs of one side over a netlink socket
// opened in that namespace; each Read is one dump, cheap enough to sample
// every few hundred milliseconds.
type QdiscReader struct {
	mu    sync.Mutex
	fd    int
	seq   uint32
	names map[int32]string
}

// Qdiscs returns a reader of side's root qdiscs. Close it when done.
func (l *Lab) Qdiscs(side int) (*QdiscReader, error) {
	r := &QdiscReader{fd: -1}
	err := l.Run(side, func() error {
		ifs, err := net.Interfaces()
		if err != nil {
			return err
		}
		r.names = map[int32]string{}
		for _, i := range ifs {
			r.names[int32(i.Index)] = i.Name
		}
		r.fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
		if err != nil {
			return err
		}
		return unix.Bind(r.fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
	})
	if err != nil {
		if r.fd >= 0 {
			unix.Close(r.fd)
		}
		return nil, fmt.Errorf("lab: qdisc reader in %s: %w", l.NS(side), err)
	}
	return r, nil
}

// Close closes the netlink socket.
func (r *QdiscReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fd < 0 {
		return nil
	}
	err := unix.Close(r.fd)
	r.fd = -1
	return err
}

// Read returns the counters of every root qdisc, keyed by device name.
func (r *QdiscReader) Read() (map[string]Qdisc, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fd < 0 {
		return nil, fmt.Errorf("lab: qdisc reader: %w", net.ErrClosed)
	}
	r.seq++
	const tcmsgLen = 20
	req := make([]byte, unix.NLMSG_HDRLEN+tcmsgLen)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], unix.RTM_GETQDISC)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	ne.PutUint32(req[8:], r.seq)
	if err := unix.Sendto(r.fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("lab: qdisc dump: %w", err)
	}
	out := map[string]Qdisc{}
	buf := make([]byte, 64<<10)
	for {
		n, _, err := unix.Recvfrom(r.fd, buf, 0)
		if err != nil {
			return nil, fmt.Errorf("lab: qdisc dump: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, fmt.Errorf("lab: qdisc dump: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Seq != r.seq {
				continue
			}
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return out, nil
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if code := int32(ne.Uint32(m.Data)); code != 0 {
						return nil, fmt.Errorf("lab: qdisc dump: %w", syscall.Errno(-code))
					}
				}
				return out, nil
			case unix.RTM_NEWQDISC:
				if len(m.Data) < tcmsgLen {
					continue
				}
				ifindex := int32(ne.Uint32(m.Data[4:]))
				parent := ne.Uint32(m.Data[12:])
				if parent != tcHRoot {
					continue
				}
				q := parseQdiscAttrs(m.Data[tcmsgLen:])
				q.Dev = r.names[ifindex]
				if q.Dev == "" {
					q.Dev = fmt.Sprintf("if%d", ifindex)
				}
				out[q.Dev] = q
			}
		}
	}
}

// Netlink attribute types of a qdisc message (linux/rtnetlink.h,
// linux/gen_stats.h).
const (
	tcaKind        = 1
	tcaStats2      = 7
	tcaStatsBasic  = 1
	tcaStatsQueue  = 3
	nlaTypeMask    = 0x3fff
	nlaHeaderBytes = 4
	tcHRoot        = 0xFFFFFFFF // TC_H_ROOT: the parent of a root qdisc
)

// walkAttrs calls fn for every netlink attribute in b.
func walkAttrs(b []byte, fn func(typ uint16, val []byte)) {
	ne := binary.NativeEndian
	for len(b) >= nlaHeaderBytes {
		l := int(ne.Uint16(b))
		if l < nlaHeaderBytes || l > len(b) {
			return
		}
		fn(ne.Uint16(b[2:])&nlaTypeMask, b[nlaHeaderBytes:l])
		l = (l + 3) &^ 3
		if l > len(b) {
			return
		}
		b = b[l:]
	}
}

func parseQdiscAttrs(b []byte) Qdisc {
	var q Qdisc
	ne := binary.NativeEndian
	walkAttrs(b, func(typ uint16, val []byte) {
		switch typ {
		case tcaKind:
			for i, c := range val {
				if c == 0 {
					val = val[:i]
					break
				}
			}
			q.Kind = string(val)
		case tcaStats2:
			walkAttrs(val, func(typ uint16, v []byte) {
				switch typ {
				case tcaStatsBasic: // struct gnet_stats_basic { u64 bytes; u32 packets; }
					if len(v) >= 12 {
						q.Bytes = ne.Uint64(v)
						q.Packets = uint64(ne.Uint32(v[8:]))
					}
				case tcaStatsQueue: // struct gnet_stats_queue
					if len(v) >= 20 {
						q.Qlen = ne.Uint32(v)
						q.Backlog = ne.Uint32(v[4:])
						q.Drops = ne.Uint32(v[8:])
						q.Requeues = ne.Uint32(v[12:])
						q.Overlimits = ne.Uint32(v[16:])
					}
				}
			})
		}
	})
	return q
}
