package handshake

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// pollUntil polls r until it reports something, failing after 10 s.
func pollUntil(t *testing.T, r *Reader) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !r.Poll() {
		if time.Now().After(deadline) {
			t.Fatal("Poll saw nothing for 10 s")
		}
		runtime.Gosched()
	}
}

// TestReaderPoll: Poll reports nothing on a quiet connection, then the
// bytes written (which the next read returns without waiting), the end of
// the stream, and a passed deadline; a connection without a file
// descriptor cannot poll.
func TestReaderPoll(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("polling a socket without waiting needs Linux")
	}
	c, s := tcpPair(t)
	r := NewReader(s, 64<<10)
	if !r.CanPoll() || r.FD() < 0 {
		t.Fatalf("a TCP connection: CanPoll %v, FD %d", r.CanPoll(), r.FD())
	}
	if r.Poll() {
		t.Fatal("Poll on a quiet connection reported something")
	}
	if _, err := c.Write([]byte("hello, rails")); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, r)
	if r.Buffered() == 0 {
		t.Fatal("Poll reported data but buffered none")
	}
	got := make([]byte, 12)
	if err := r.ReadFull(got); err != nil || string(got) != "hello, rails" {
		t.Fatalf("after Poll: %q, %v", got, err)
	}
	if r.Poll() {
		t.Fatal("Poll reported something after everything was read")
	}
	if err := s.SetReadDeadline(time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	if !r.Poll() {
		t.Fatal("Poll ignored a passed deadline")
	}
	if err := r.ReadFull(got); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after a passed deadline: %v", err)
	}
	if err := s.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	pollUntil(t, r)
	if err := r.ReadFull(got); err != io.EOF {
		t.Fatalf("read after the peer closed: %v, want io.EOF", err)
	}

	p, q := net.Pipe()
	defer p.Close()
	defer q.Close()
	pr := NewReader(p, 4096)
	if pr.CanPoll() || pr.FD() != -1 || pr.Poll() {
		t.Fatal("a net.Pipe can poll")
	}
}

// TestQuickWriter: a batch the socket has room for is written whole; when
// the peer stops reading, writes come back short or empty (never an error,
// never waiting), and the bytes the writer reported are exactly the bytes
// the peer reads; a closed connection fails.
func TestQuickWriter(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("polling a socket without waiting needs Linux")
	}
	c, s := tcpPair(t)
	q := NewQuickWriter(c)
	if q == nil {
		t.Fatal("no quick writer for a TCP connection")
	}
	if n, err := q.Write([][]byte{[]byte("ab"), nil, []byte("cde")}); n != 5 || err != nil {
		t.Fatalf("small batch: %d, %v", n, err)
	}
	got := make([]byte, 5)
	if _, err := io.ReadFull(s, got); err != nil || string(got) != "abcde" {
		t.Fatalf("read %q, %v", got, err)
	}
	var sent bytes.Buffer
	chunk := make([]byte, QuickMax/2)
	short := false
	for i := 0; !short; i++ {
		if i > 100000 {
			t.Fatal("the socket never filled")
		}
		for j := range chunk {
			chunk[j] = byte(i + j)
		}
		n, err := q.Write([][]byte{chunk[:len(chunk)/2], chunk[len(chunk)/2:]})
		if err != nil {
			t.Fatal(err)
		}
		sent.Write(chunk[:n])
		short = n < len(chunk)
	}
	c.Close()
	all, err := io.ReadAll(s)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(all, sent.Bytes()) {
		t.Fatalf("the peer read %d bytes, the writer reported %d (or they differ)", len(all), sent.Len())
	}
	if _, err := q.Write([][]byte{[]byte("late")}); err == nil {
		t.Fatal("a write on a closed connection succeeded")
	}
	p, _ := net.Pipe()
	defer p.Close()
	if NewQuickWriter(p) != nil {
		t.Fatal("a quick writer for a net.Pipe")
	}
}

// TestRawIONeedsNonBlocking: a connection whose descriptor blocks gets
// neither polling nor quick writes (a raw system call on it could block
// the thread behind the runtime's back).
func TestRawIONeedsNonBlocking(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("polling a socket without waiting needs Linux")
	}
	c, _ := tcpPair(t)
	f, err := c.(*net.TCPConn).File() // a duplicate of the descriptor
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_ = f.Fd() // puts it in blocking mode
	bc := blockingConn{Conn: c, f: f}
	if r := NewReader(bc, 4096); r.CanPoll() || r.FD() != -1 {
		t.Error("a blocking descriptor can poll")
	}
	if NewQuickWriter(bc) != nil {
		t.Error("a quick writer for a blocking descriptor")
	}
}

// blockingConn is a net.Conn whose SyscallConn is a descriptor in
// blocking mode.
type blockingConn struct {
	net.Conn
	f *os.File
}

func (b blockingConn) SyscallConn() (syscall.RawConn, error) { return b.f.SyscallConn() }
