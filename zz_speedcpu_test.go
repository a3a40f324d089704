package multirail

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestSpeedCPU(t *testing.T) {
	sizes := os.Getenv("SPEED_SIZES")
	if sizes == "" {
		t.Skip("SPEED_SIZES")
	}
	total := int64(2 << 30)
	if v := os.Getenv("SPEED_TOTAL"); v != "" {
		n, _ := strconv.ParseInt(v, 10, 64)
		total = n
	}
	seg := 0
	if v := os.Getenv("SPEED_SEG"); v != "" {
		seg, _ = strconv.Atoi(v)
	}
	for _, ss := range strings.Split(sizes, ",") {
		size, _ := strconv.Atoi(ss)
		n := int(total / int64(size))
		// multirail
		a, s := pair(t, 1, Config{SegmentSize: seg})
		ctx := context.Background()
		msg := make([]byte, size)
		window := max(4, min(256, (8<<20)/size))
		c0, w0 := cpuNow(), time.Now()
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; i < n; i++ {
				m, err := s.Recv(ctx)
				if err != nil {
					return
				}
				s.Release(m.Data)
			}
		}()
		next := make(chan int, window)
		for g := 0; g < window; g++ {
			go func() {
				for range next {
					if err := a.Send(ctx, uint32(g), msg); err != nil {
						return
					}
				}
			}()
		}
		for i := 0; i < n; i++ {
			next <- i
		}
		close(next)
		<-done
		mc, mw := cpuNow()-c0, time.Since(w0)
		a.Close()
		s.Close()
		// tcp
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		c0, w0 = cpuNow(), time.Now()
		done = make(chan struct{})
		go func() {
			defer close(done)
			c, _ := ln.Accept()
			buf := make([]byte, size)
			for i := 0; i < n; i++ {
				io.ReadFull(c, buf)
			}
			c.Close()
		}()
		c, _ := net.Dial("tcp", ln.Addr().String())
		for i := 0; i < n; i++ {
			c.Write(msg)
		}
		<-done
		tc, tw := cpuNow()-c0, time.Since(w0)
		c.Close()
		ln.Close()
		gb := float64(int64(n)*int64(size)) / 1e9
		fmt.Printf("size %8d: multirail %.3f cpu-s/GB %.1f Gbit/s | tcp %.3f cpu-s/GB %.1f Gbit/s | cpu ratio tcp/mr %.2f wall ratio %.2f\n",
			size, mc.Seconds()/gb, gb*8/mw.Seconds(), tc.Seconds()/gb, gb*8/tw.Seconds(), tc.Seconds()/mc.Seconds(), tw.Seconds()/mw.Seconds())
	}
}
