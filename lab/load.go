package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/multirail/multirail/internal/measure"
)

// SeriesBucket is the width of the buckets of LoadResult.Series.
const SeriesBucket = 250 * time.Millisecond

// LoadResult is what the receiver of a background stream measured.
type LoadResult struct {
	Rail int
	// Start is when the stream began to send; Series counts from there.
	Start time.Time
	// Duration is how long the stream sent (shorter when stopped early).
	Duration time.Duration
	// Bytes is what the receiver got within [Start, Start+Duration].
	Bytes int64
	// GoodputBps is Bytes*8/Duration.
	GoodputBps float64
	// Bucket is the width of the buckets of Series, SeriesBucket.
	Bucket time.Duration
	// Series holds the bytes received per Bucket since Start.
	Series []int64
}

// MeanBps returns the mean rate in bits/s of the buckets of series (each
// width wide, the first starting at 0) that lie entirely within
// [from, to); 0 when none does. It is measure.WindowRate.
func MeanBps(series []int64, width, from, to time.Duration) float64 {
	return measure.WindowRate(series, width, from, to)
}

// LoadStream is one TCP stream from A to B over one rail, competing with
// whatever else runs there.
type LoadStream struct {
	cancel context.CancelFunc
	done   chan struct{}
	res    LoadResult
	err    error
}

// Load starts one TCP stream from A to B over rail that sends as fast as
// it can during [now+start, now+start+dur), measured at the receiver.
// Both ends are Go sockets made in the namespaces with Run. The connection
// is opened before Load returns (an unreachable rail is an error here);
// sending begins at start. Call Wait (or Stop) to get the result.
func (l *Lab) Load(ctx context.Context, rail int, start, dur time.Duration) (*LoadStream, error) {
	if rail < 0 || rail >= l.Rails() {
		return nil, fmt.Errorf("lab: load on rail %d: allowed 0..%d", rail, l.Rails()-1)
	}
	if start < 0 || dur <= 0 {
		return nil, fmt.Errorf("lab: load start %v, duration %v: want start >= 0 and duration > 0", start, dur)
	}
	var ln *net.TCPListener
	if err := l.Run(1, func() error {
		a, err := net.ResolveTCPAddr("tcp4", net.JoinHostPort(RailIP(1, rail), "0"))
		if err != nil {
			return err
		}
		ln, err = net.ListenTCP("tcp4", a)
		return err
	}); err != nil {
		return nil, fmt.Errorf("lab: load on rail %d: %w", rail, err)
	}
	defer ln.Close()
	type accepted struct {
		c   *net.TCPConn
		err error
	}
	acc := make(chan accepted, 1)
	_ = ln.SetDeadline(time.Now().Add(5 * time.Second))
	go func() { c, err := ln.AcceptTCP(); acc <- accepted{c, err} }()
	var cc net.Conn
	err := l.Run(0, func() (err error) {
		d := net.Dialer{Timeout: 3 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(RailIP(0, rail))}}
		cc, err = d.DialContext(ctx, "tcp4", ln.Addr().String())
		return err
	})
	if err != nil {
		_ = ln.Close()
		<-acc
		return nil, fmt.Errorf("lab: load on rail %d: %w", rail, err)
	}
	a := <-acc
	if a.err != nil {
		cc.Close()
		return nil, fmt.Errorf("lab: load on rail %d: accept: %w", rail, a.err)
	}
	sc := a.c

	ctx, cancel := context.WithCancel(ctx)
	s := &LoadStream{cancel: cancel, done: make(chan struct{})}
	t0 := time.Now().Add(start)
	end := t0.Add(dur)
	nb := int((dur + SeriesBucket - 1) / SeriesBucket)
	s.res = LoadResult{Rail: rail, Start: t0, Duration: dur, Bucket: SeriesBucket, Series: make([]int64, nb)}
	finished := make(chan struct{})   // sender and receiver are done
	closerDone := make(chan struct{}) // the closer is done
	go func() {                       // closes both ends when the caller gives up early
		defer close(closerDone)
		select {
		case <-ctx.Done():
			_ = cc.Close()
			_ = sc.Close()
		case <-finished:
		}
	}()
	var (
		wg      sync.WaitGroup
		rerr    error
		stopped time.Time
	)
	wg.Add(2)
	go func() { // sender
		defer wg.Done()
		defer cc.Close()
		select {
		case <-time.After(time.Until(t0)):
		case <-ctx.Done():
			return
		}
		_ = cc.SetWriteDeadline(end)
		buf := make([]byte, 128<<10)
		for {
			if _, err := cc.Write(buf); err != nil {
				return
			}
		}
	}()
	go func() { // receiver
		defer wg.Done()
		defer sc.Close()
		_ = sc.SetReadDeadline(end)
		buf := make([]byte, 256<<10)
		for {
			n, err := sc.Read(buf)
			now := time.Now()
			if n > 0 && !now.Before(t0) && now.Before(end) {
				s.res.Bytes += int64(n)
				if i := int(now.Sub(t0) / SeriesBucket); i < nb {
					s.res.Series[i] += int64(n)
				}
			}
			if err != nil {
				switch {
				case ctx.Err() != nil:
					stopped = now
				case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, io.EOF):
				default:
					rerr = err
				}
				return
			}
		}
	}()
	go func() {
		wg.Wait()
		close(finished)
		<-closerDone
		if !stopped.IsZero() && stopped.Before(end) {
			s.res.Duration = max(stopped.Sub(t0), 0)
		}
		if s.res.Duration > 0 {
			s.res.GoodputBps = float64(s.res.Bytes) * 8 / s.res.Duration.Seconds()
		}
		s.err = rerr
		cancel()
		close(s.done)
	}()
	return s, nil
}

// Wait waits until the stream has ended and returns what the receiver
// measured.
func (s *LoadStream) Wait() (LoadResult, error) {
	<-s.done
	return s.res, s.err
}

// Stop ends the stream early and returns what was measured so far.
func (s *LoadStream) Stop() (LoadResult, error) {
	s.cancel()
	return s.Wait()
}
