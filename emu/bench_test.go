package emu

import (
	"io"
	"net"
	"testing"
	"time"
)

// BenchmarkLinkThroughput pushes a bulk transfer (about 0.8 s worth of the
// rate, at least 4 MB) through a Link in one direction and reports the
// delivered rate ("bps") and its ratio to the capacity the link's profile
// offered over the transfer ("efficiency"; 1 is exact, the initial burst
// makes it a little above 1 for short transfers).
func BenchmarkLinkThroughput(b *testing.B) {
	for _, tc := range []struct {
		name string
		cfg  LinkConfig
	}{
		{"50mbit", LinkConfig{RateBps: 50e6}},
		{"200mbit", LinkConfig{RateBps: 200e6}},
		{"1gbit", LinkConfig{RateBps: 1e9}},
		{"200mbit/2ms", LinkConfig{RateBps: 200e6, Delay: 2 * time.Millisecond}},
		// Half the capacity is taken away 0.3 s into the transfer.
		{"200mbit/load", LinkConfig{RateBps: 200e6, Loads: []Load{{Fraction: 0.5, At: 300 * time.Millisecond}}}},
	} {
		b.Run(tc.name, func(b *testing.B) { benchThroughput(b, tc.cfg) })
	}
}

func benchThroughput(b *testing.B, cfg LinkConfig) {
	size := max(int64(cfg.RateBps/8*0.8), 4<<20)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	link, err := NewLink(ln.Addr().String(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer link.Close()
	buf := make([]byte, 64<<10)
	b.SetBytes(size)
	b.ResetTimer()
	var elapsed, offered float64 // seconds, bits
	for i := 0; i < b.N; i++ {
		c, err := net.Dial("tcp", link.Addr())
		if err != nil {
			b.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			b.Fatal(err)
		}
		got := make(chan int64, 1)
		go func() {
			n, _ := io.Copy(io.Discard, s)
			got <- n
		}()
		start := time.Now()
		link.SetEpoch(start)
		for sent := int64(0); sent < size; {
			n := min(int64(len(buf)), size-sent)
			if _, err := c.Write(buf[:n]); err != nil {
				b.Fatal(err)
			}
			sent += n
		}
		_ = c.(*net.TCPConn).CloseWrite()
		n := <-got
		end := time.Now()
		elapsed += end.Sub(start).Seconds()
		offered += link.Capacity(start, end) * end.Sub(start).Seconds()
		c.Close()
		s.Close()
		if n != size {
			b.Fatalf("received %d bytes, want %d", n, size)
		}
	}
	bits := float64(size) * 8 * float64(b.N)
	b.ReportMetric(bits/offered, "efficiency")
	b.ReportMetric(bits/elapsed, "bps")
}
