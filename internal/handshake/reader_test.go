package handshake

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"testing"
	"time"
)

func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() { c, _ := ln.Accept(); ch <- c }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-ch
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}

// TestReaderChunks: reads of random sizes with random look-ahead return
// exactly the bytes written, in order.
func TestReaderChunks(t *testing.T) {
	c, s := tcpPair(t)
	rng := rand.New(rand.NewPCG(3, 4))
	want := make([]byte, 4<<20)
	for i := range want {
		want[i] = byte(rng.Uint32())
	}
	go func() {
		for off := 0; off < len(want); {
			n := min(len(want)-off, 1+rng.IntN(100<<10))
			if _, err := c.Write(want[off : off+n]); err != nil {
				return
			}
			off += n
		}
	}()
	r := NewReader(s, 64<<10)
	var got []byte
	for len(got) < len(want) {
		n := min(len(want)-len(got), 1+rand.IntN(90<<10))
		p := make([]byte, n)
		if err := r.ReadFull(p); err != nil {
			t.Fatal(err)
		}
		got = append(got, p...)
		r.LookAhead(rand.IntN(40 << 10))
	}
	if !bytes.Equal(got, want) {
		t.Fatal("bytes differ")
	}
}

// TestReaderDeadlineResume: a read cut by a deadline reports how much it
// got, leaves the reader consistent, and resumes.
func TestReaderDeadlineResume(t *testing.T) {
	c, s := tcpPair(t)
	r := NewReader(s, 64<<10)
	// A first read fills the readv state with a large count.
	c.Write(bytes.Repeat([]byte{1}, 50000))
	if err := r.ReadFull(make([]byte, 50000)); err != nil {
		t.Fatal(err)
	}
	c.Write([]byte{1, 2, 3})
	s.SetReadDeadline(time.Unix(1, 0)) // already passed: Read fails before reading
	p := make([]byte, 10)
	n, err := r.ReadFullN(p)
	if !errors.Is(err, os.ErrDeadlineExceeded) || n > 3 || r.Buffered() < 0 || r.Buffered() > 3 {
		t.Fatalf("ReadFullN = %d, %v; buffered %d", n, err, r.Buffered())
	}
	s.SetReadDeadline(time.Time{})
	c.Write([]byte{4, 5, 6, 7, 8, 9, 10})
	m, err := r.ReadFullN(p[n:])
	if err != nil || n+m != 10 || !bytes.Equal(p, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) {
		t.Fatalf("resumed read: %d+%d bytes %v, %v", n, m, p, err)
	}
	c.Close()
	if err := r.ReadFull(p[:1]); !errors.Is(err, io.EOF) {
		t.Fatalf("after close: %v, want EOF", err)
	}
}

// TestReaderWakesOncePerPayload: a payload that arrives in many small
// pieces is read in a few reads, not one per piece (on Linux the read that
// finds the socket empty sets the receive low-water mark to the rest of
// the payload), and a short read after it is not held back by that mark.
func TestReaderWakesOncePerPayload(t *testing.T) {
	c, s := tcpPair(t)
	const pieces, piece = 32, 4 << 10
	payload := bytes.Repeat([]byte{7}, pieces*piece)
	tail := []byte("next frame")
	go func() {
		for i := 0; i < pieces; i++ {
			if _, err := c.Write(payload[i*piece : (i+1)*piece]); err != nil {
				return
			}
			time.Sleep(time.Millisecond) // pieces, as a slow rail delivers them
		}
		c.Write(tail)
	}()
	r := NewReader(s, 64<<10)
	s.SetReadDeadline(time.Now().Add(10 * time.Second))
	p := make([]byte, len(payload))
	if err := r.ReadFull(p); err != nil || !bytes.Equal(p, payload) {
		t.Fatalf("payload: %v", err)
	}
	reads := r.Reads()
	q := make([]byte, len(tail))
	if err := r.ReadFull(q); err != nil || !bytes.Equal(q, tail) {
		t.Fatalf("the short read after the payload: %q, %v", q, err)
	}
	if r.rv != nil && reads > pieces/4 {
		t.Errorf("%d reads for a payload of %d pieces; want a few", reads, pieces)
	}
	t.Logf("%d reads for %d pieces", reads, pieces)
}
