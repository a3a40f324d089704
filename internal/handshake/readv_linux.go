package handshake

import (
	"io"
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

func readvFor(c net.Conn) (readvFunc, func()) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, nil
	}
	v := &readv{iov: make([][]byte, 2), low: 1}
	v.fn = v.read // one method value, not a closure per call
	v.resetFn = v.reset
	reset := func() {
		if v.low != 1 {
			_ = raw.Control(v.resetFn)
		}
	}
	return func(p, q []byte) (int, int, error) {
		v.iov[0], v.iov[1] = p, q
		v.cur = v.iov[:2]
		if len(q) == 0 {
			v.cur = v.iov[:1]
		}
		v.n, v.err = 0, nil // Read may fail (deadline) without calling fn
		err := raw.Read(v.fn)
		n, rerr := v.n, v.err
		if n > 0 {
			ioAcquire()
		}
		v.iov[0], v.iov[1], v.cur, v.err = nil, nil, nil, nil
		if err == nil {
			err = rerr
		}
		if n < 0 {
			n = 0
		}
		if err == nil && n == 0 {
			err = io.EOF
		}
		m := min(n, len(p))
		return m, n - m, err
	}, reset
}

// readv holds one Reader's readv(2) call state, so that a read allocates
// nothing.
type readv struct {
	iov, cur [][]byte
	n        int
	err      error
	fn       func(fd uintptr) bool
	resetFn  func(fd uintptr)
	low      int // the socket's SO_RCVLOWAT as last set
}

// maxLowat bounds the receive low-water mark a payload read sets.
const maxLowat = 1 << 20

func (v *readv) read(fd uintptr) bool {
	v.n, v.err = unix.Readv(int(fd), v.cur)
	if v.err != unix.EAGAIN {
		return true
	}
	// Nothing there yet: wait until the rest of the payload is (the
	// sender is in the middle of the frame, so it comes), not for every
	// packet. On a slow rail a 64 KiB segment otherwise costs a wake-up
	// and a readv per few packets. EOF and errors wake the reader anyway.
	if want := min(len(v.cur[0]), maxLowat); want != v.low && unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT, want) == nil {
		v.low = want
	}
	return false
}

// reset puts the low-water mark back to one byte, before reads of unknown
// length (a header).
func (v *readv) reset(fd uintptr) {
	if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT, 1) == nil {
		v.low = 1
	}
}

// pollFor returns a read that never waits, for connections with a file
// descriptor. The socket is non-blocking (Go's runtime made it so), and
// the read(2) goes through RawSyscall: it cannot block, so the runtime
// need not be told, which halves its cost for a reader that polls in a
// loop (16-18 against 26-36 us per 8-byte round trip over the lab's
// rails, both ends polling). raw.Read holds the descriptor for the call,
// so a concurrent Close cannot hand its number to another file meanwhile;
// once the connection is closed or its read deadline passed, raw.Read
// fails without calling the function.
func pollFor(c net.Conn) (pollFunc, int) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, -1
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, -1
	}
	fd := -1
	if raw.Control(func(f uintptr) {
		if nonBlocking(f) {
			fd = int(f)
		}
	}) != nil || fd < 0 {
		return nil, -1
	}
	p := &poller{}
	p.fn = p.read
	return func(b []byte) (int, error) {
		p.buf, p.n, p.err = b, 0, nil
		err := raw.Read(p.fn)
		n, rerr := p.n, p.err
		p.buf, p.err = nil, nil
		if err != nil {
			return 0, err
		}
		if errno, ok := rerr.(unix.Errno); ok && errno == unix.EAGAIN {
			return 0, nil
		}
		if rerr == nil && n == 0 {
			return 0, io.EOF
		}
		return max(n, 0), rerr
	}, fd
}

// poller holds one Reader's polling read, so that a poll allocates
// nothing.
type poller struct {
	buf []byte
	n   int
	err error
	fn  func(fd uintptr) bool
}

func (p *poller) read(fd uintptr) bool {
	if len(p.buf) == 0 {
		return true
	}
	n, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&p.buf[0])), uintptr(len(p.buf)))
	p.n = int(n)
	if e != 0 {
		p.n, p.err = 0, e
	}
	return true
}

// QuickWriter writes small batches to a socket without waiting: see
// NewQuickWriter.
type QuickWriter struct {
	raw  syscall.RawConn
	iov  []unix.Iovec
	n    int
	err  error
	fn   func(fd uintptr) bool
	bufs [][]byte
}

// NewQuickWriter returns a QuickWriter for c, or nil when c has no file
// descriptor (or the platform is not Linux).
//
// Its writev(2) goes through RawSyscall, as Reader.Poll's read does: on
// the non-blocking socket it cannot block, and a system call the runtime
// is told about is one the runtime's monitor may take the processor away
// from when it lasts more than a tick (20 us: a small write on a virtual
// machine's loopback often does, as it delivers to the receiver inline),
// which then costs a thread hand-off and a futex wake-up per message.
func NewQuickWriter(c net.Conn) *QuickWriter {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	ok = false
	if raw.Control(func(fd uintptr) { ok = nonBlocking(fd) }) != nil || !ok {
		return nil
	}
	q := &QuickWriter{raw: raw}
	q.fn = q.write
	return q
}

// QuickMax is the most a QuickWriter writes in one call: a call copies
// its bytes into the socket without the runtime knowing, so it must stay
// short.
const QuickMax = 64 << 10

// Write writes what the socket takes now of bufs (at most QuickMax bytes
// in all, at most 1024 buffers) and returns how many bytes that was: 0 with
// a nil error when the socket's buffer is full.
func (q *QuickWriter) Write(bufs [][]byte) (int, error) {
	q.bufs, q.n, q.err = bufs, 0, nil
	ioRelease() // before the bytes leave, as internal/poll's Write does
	err := q.raw.Write(q.fn)
	n, werr := q.n, q.err
	q.bufs, q.err = nil, nil
	clear(q.iov)
	if err != nil {
		return 0, err
	}
	if werr == unix.EAGAIN {
		return 0, nil
	}
	return n, werr
}

func (q *QuickWriter) write(fd uintptr) bool {
	q.iov = q.iov[:0]
	for _, b := range q.bufs {
		if len(b) > 0 {
			v := unix.Iovec{Base: &b[0]}
			v.SetLen(len(b))
			q.iov = append(q.iov, v)
		}
	}
	if len(q.iov) == 0 {
		return true
	}
	n, _, e := unix.RawSyscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&q.iov[0])), uintptr(len(q.iov)))
	q.n = int(n)
	if e != 0 {
		q.n, q.err = 0, e
	}
	return true
}

// nonBlocking reports whether fd is in non-blocking mode (Go's sockets
// are; a descriptor a custom net.Conn hands out might not be, and a raw
// read or write on it could block the thread without the runtime knowing).
func nonBlocking(fd uintptr) bool {
	fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
	return err == nil && fl&unix.O_NONBLOCK != 0
}
