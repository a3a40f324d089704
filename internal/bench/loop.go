package bench

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/multirail/multirail"
)

// Payload returns a message of size bytes filled with the pattern every
// sender of this module's benchmarks uses (byte i is i*7).
func Payload(size int) []byte {
	msg := make([]byte, size)
	for i := range msg {
		msg[i] = byte(i * 7)
	}
	return msg
}

// SendOptions are the variations of the windowed send loop.
type SendOptions struct {
	// Window is the number of Sends kept in flight: goroutine g sends on
	// tag g, one message after the other. Values below 1 mean 1.
	Window int
	// Until is when the loop stops: no Send starts at or after it (the
	// Sends in flight then complete).
	Until time.Time
	// OnStart, when set, is called by goroutine g just before each Send,
	// with its tag and the time.
	OnStart func(tag int, at time.Time)
	// OnDone, when set, is called after each Send that returned nil, with
	// its tag, when it started and how long it took.
	OnDone func(tag int, start time.Time, took time.Duration)
}

// SendWindow is the windowed send loop of every benchmark here: o.Window
// goroutines send msg on c back to back until o.Until, goroutine g on tag
// g. msg is only read (Send does not modify it), so every goroutine sends
// the same buffer. SendWindow returns when every goroutine has stopped,
// with the number of Sends that completed and the first error a Send
// returned (a goroutine stops at its first error; the others go on).
func SendWindow(ctx context.Context, c *multirail.Conn, msg []byte, o SendOptions) (int, error) {
	var (
		wg      sync.WaitGroup
		done    atomic.Int64
		errOnce sync.Once
		first   error
	)
	for g := 0; g < max(o.Window, 1); g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(o.Until) {
				t0 := time.Now()
				if o.OnStart != nil {
					o.OnStart(g, t0)
				}
				if err := c.Send(ctx, uint32(g), msg); err != nil {
					errOnce.Do(func() { first = err })
					return
				}
				done.Add(1)
				if o.OnDone != nil {
					o.OnDone(g, t0, time.Since(t0))
				}
			}
		}()
	}
	wg.Wait()
	return int(done.Load()), first
}

// Receive is the receive loop of every benchmark here: it receives on c
// until the peer closes (then it returns nil), ctx ends or fn fails, and
// returns that error. fn, when set, sees each message and the time Recv
// returned it; the message's buffer goes back to c after fn returns, so
// fn must not keep m.Data.
func Receive(ctx context.Context, c *multirail.Conn, fn func(m multirail.Message, at time.Time) error) error {
	for {
		m, err := c.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if fn != nil {
			err = fn(m, time.Now())
		}
		c.Release(m.Data)
		if err != nil {
			return err
		}
	}
}
