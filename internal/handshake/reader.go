package handshake

import (
	"io"
	"net"
	"sync/atomic"
)

// Reader reads a rail's frames with few system calls: a payload is read
// straight into its destination, and the same read fetches what follows
// (the next headers, small frames) into a look-ahead buffer. On Linux that
// is one readv(2); elsewhere it falls back to plain reads.
type Reader struct {
	c  net.Conn
	rv readvFunc // nil: plain reads
	// poll reads what has arrived without waiting (nil: c has no file
	// descriptor to poll; see Poll).
	poll pollFunc
	fd   int // the connection's file descriptor for polling; -1 if none
	// unlow puts back a low-water mark a readv set (nil: none), before a
	// read of something shorter than the payload that set it.
	unlow func()
	buf   []byte
	r, w  int
	// ahead bounds the look-ahead of the next read (see LookAhead).
	ahead int
	// reads counts the system calls that returned data, for watchers on
	// other goroutines that want to see a stream make progress.
	reads atomic.Uint64
}

// Reads is the number of reads so far that returned data; it may be
// called from any goroutine.
func (b *Reader) Reads() uint64 { return b.reads.Load() }

const (
	bigRead   = 16 << 10
	lookAhead = 4 << 10
)

// readvFunc reads into p, then q, in one call, returning the bytes put in
// each.
type readvFunc func(p, q []byte) (int, int, error)

// pollFunc reads into p what has arrived, without waiting: 0 and a nil
// error when nothing has.
type pollFunc func(p []byte) (int, error)

// NewReader returns a Reader over c with a look-ahead buffer of size bytes.
func NewReader(c net.Conn, size int) *Reader {
	rv, unlow := readvFor(c)
	poll, fd := pollFor(c)
	return &Reader{c: c, rv: rv, poll: poll, fd: fd, unlow: unlow, buf: make([]byte, size), ahead: size}
}

// FD is the file descriptor Poll reads, for a poll(2) that watches many
// connections at once; -1 when !CanPoll. It is valid while the
// connection is open.
func (b *Reader) FD() int { return b.fd }

// CanPoll reports whether Poll can look at the connection without waiting
// (on Linux, for connections with a file descriptor, such as TCP).
func (b *Reader) CanPoll() bool { return b.poll != nil }

// Poll looks for data without waiting: when nothing is buffered, it reads
// whatever has arrived into the look-ahead buffer. It reports whether the
// next read will return without waiting for the peer: data is buffered,
// or the connection has something else to say (end of stream, an error,
// a passed deadline), which that read then reports. It is false when
// nothing has arrived, and always false when !CanPoll.
func (b *Reader) Poll() bool {
	if b.w > b.r {
		return true
	}
	if b.poll == nil {
		return false
	}
	if b.unlow != nil {
		b.unlow()
	}
	n, err := b.poll(b.buf[:b.ahead])
	if n > 0 {
		ioAcquire()
		b.r, b.w = 0, n
		b.reads.Add(1)
		return true
	}
	return err != nil
}

// LookAhead tells the reader what to expect: after big payloads, read
// ahead only a little (what is read ahead is copied once more); after
// small frames, read ahead a whole buffer (one system call for many).
func (b *Reader) LookAhead(lastPayload int) {
	if lastPayload >= bigRead {
		b.ahead = lookAhead
	} else {
		b.ahead = len(b.buf)
	}
}

// Buffered is the number of bytes read ahead and not yet consumed.
func (b *Reader) Buffered() int { return b.w - b.r }

// ReadFull fills p, returning io.ErrUnexpectedEOF if the stream ends
// partway and io.EOF if it ends before the first byte.
func (b *Reader) ReadFull(p []byte) error {
	_, err := b.ReadFullN(p)
	return err
}

// ReadFullN is ReadFull that also says how many bytes of p it filled
// before an error, so that a read interrupted by a deadline can resume.
func (b *Reader) ReadFullN(p []byte) (int, error) {
	n := copy(p, b.buf[b.r:b.w])
	b.r += n
	if b.r == b.w {
		b.r, b.w = 0, 0
	}
	for n < len(p) {
		var (
			m, k int
			err  error
		)
		if b.rv != nil && len(p)-n >= bigRead {
			// A big payload: read it in place, plus a little look-ahead.
			q := b.buf[b.w:]
			if len(q) > b.ahead {
				q = q[:b.ahead]
			}
			m, k, err = b.rv(p[n:], q)
		} else if len(p)-n < len(b.buf) {
			// Small read (a header, a small payload): fill the (empty)
			// look-ahead buffer with one plain read, then copy.
			if b.unlow != nil {
				b.unlow()
			}
			var got int
			got, err = b.c.Read(b.buf[:b.ahead])
			m = copy(p[n:], b.buf[:got])
			b.r, b.w = m, got
			if b.r == b.w {
				b.r, b.w = 0, 0
			}
		} else {
			if b.unlow != nil {
				b.unlow()
			}
			m, err = b.c.Read(p[n:])
		}
		n += m
		b.w += k
		if m+k > 0 {
			b.reads.Add(1)
		}
		if err != nil {
			if n == len(p) {
				return n, nil // the error comes back on the next read
			}
			if err == io.EOF && n > 0 {
				err = io.ErrUnexpectedEOF
			}
			return n, err
		}
		if m == 0 && k == 0 {
			return n, io.ErrNoProgress
		}
	}
	return n, nil
}
