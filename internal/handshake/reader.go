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

// NewReader returns a Reader over c with a look-ahead buffer of size bytes.
func NewReader(c net.Conn, size int) *Reader {
	rv, unlow := readvFor(c)
	return &Reader{c: c, rv: rv, unlow: unlow, buf: make([]byte, size), ahead: size}
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
