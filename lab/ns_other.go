//go:build !linux

package lab

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
)

var errNotLinux = errors.New("lab: network-namespace labs need Linux")

// Run fails: labs need Linux.
func (l *Lab) Run(side int, fn func() error) error { return errNotLinux }

func netnsCheck() error { return errNotLinux }

func lockPrefix(string) (*os.File, error) { return nil, errNotLinux }

func lockGlobal() (func(), error) { return nil, errNotLinux }

func killProcesses(string, *slog.Logger) error { return errNotLinux }

// Qdisc is the counters of one root qdisc.
type Qdisc struct {
	Dev, Kind                                  string
	Bytes, Packets                             uint64
	Drops, Overlimits, Requeues, Backlog, Qlen uint32
}

// QdiscReader reads root qdiscs (Linux only).
type QdiscReader struct{}

// Qdiscs fails: labs need Linux.
func (l *Lab) Qdiscs(int) (*QdiscReader, error) { return nil, errNotLinux }

// Read fails: labs need Linux.
func (r *QdiscReader) Read() (map[string]Qdisc, error) { return nil, errNotLinux }

// Close does nothing.
func (r *QdiscReader) Close() error { return nil }

// Subflow is one TCP subflow of an MPTCP connection.
type Subflow struct {
	Local, Remote             netip.AddrPort
	BytesAcked, BytesReceived uint64
}

// Subflows fails: MPTCP is Linux only.
func Subflows(*net.TCPConn) ([]Subflow, error) { return nil, errNotLinux }

func unlockFile(f *os.File) error { return errNotLinux }
