package multirail

import (
	"context"
	"io"
	"net"
	"testing"
)

// BenchmarkRoundTrip1B: a 1-byte message and its echo over one loopback
// rail (compare with BenchmarkTCPRoundTrip1B, measured in the same run).
func BenchmarkRoundTrip1B(b *testing.B) {
	a, s := pair(b, 1, Config{})
	ctx := context.Background()
	go func() {
		for {
			m, err := s.Recv(ctx)
			if err != nil {
				return
			}
			if s.Send(ctx, m.Tag, m.Data) != nil {
				return
			}
			s.Release(m.Data) // the eager Send copied it
		}
	}()
	one := []byte{1}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := a.Send(ctx, 0, one); err != nil {
			b.Fatal(err)
		}
		m, err := a.Recv(ctx)
		if err != nil {
			b.Fatal(err)
		}
		a.Release(m.Data)
	}
}

// BenchmarkTCPRoundTrip1B: plain Go TCP ping-pong on loopback.
func BenchmarkTCPRoundTrip1B(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var one [1]byte
		for {
			if _, err := io.ReadFull(c, one[:]); err != nil {
				return
			}
			if _, err := c.Write(one[:]); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var one [1]byte
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Write(one[:]); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, one[:]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStream1MiB: 1 MiB messages, 4 Sends in flight, one loopback
// rail (compare with BenchmarkTCPStream1MiB in the same run).
func BenchmarkStream1MiB(b *testing.B) {
	a, s := pair(b, 1, Config{})
	ctx := context.Background()
	msg := make([]byte, 1<<20)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < b.N; i++ {
			m, err := s.Recv(ctx)
			if err != nil {
				return
			}
			s.Release(m.Data)
		}
	}()
	b.SetBytes(int64(len(msg)))
	b.ResetTimer()
	next := make(chan int, 4)
	for g := 0; g < 4; g++ {
		go func() {
			for range next {
				if err := a.Send(ctx, uint32(g), msg); err != nil {
					return
				}
			}
		}()
	}
	for i := 0; i < b.N; i++ {
		next <- i
	}
	close(next)
	<-done
}

// BenchmarkTCPStream1MiB: plain Go TCP, 1 MiB writes on loopback.
func BenchmarkTCPStream1MiB(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 1<<20)
		for i := 0; i < b.N; i++ {
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	msg := make([]byte, 1<<20)
	b.SetBytes(int64(len(msg)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
	}
	<-done
}
