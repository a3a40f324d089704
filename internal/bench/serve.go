package bench

import (
	"context"
	"sync"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/internal/measure"
)

// ServeResult is what the receiving end of a connection measured (one
// object of `multirail serve --json`).
type ServeResult struct {
	Peer     string `json:"peer"`
	Messages int    `json:"messages"`
	Bytes    int64  `json:"bytes"`
	// DurationS is the interval the bytes took, from the first payload
	// byte received to the end of the last message (see ReceiveAll), and
	// GoodputBps is Bytes over it.
	DurationS  float64      `json:"duration_s"`
	GoodputBps float64      `json:"goodput_bps"`
	Rails      []RailResult `json:"rails"`
}

// pollEvery is how often ReceiveAll looks at the connection's counters for
// the first payload bytes.
const pollEvery = time.Millisecond

// meter accumulates a receiver's observations; the caller passes the
// times in.
type meter struct {
	// start is the first look at the counters that saw payload bytes, and
	// atStart what they had counted then: in total and per rail.
	start        time.Time
	atStart      uint64
	railsAtStart []uint64
	last         time.Time // the last message was complete
	messages     int
	bytes        int64
}

// counted records the first look at the counters that saw bytes: at at,
// perRail[i] payload bytes had been counted on rail i. Only the first
// call counts.
func (m *meter) counted(at time.Time, perRail []uint64) {
	if !m.start.IsZero() {
		return
	}
	m.start = at
	m.railsAtStart = append([]uint64(nil), perRail...)
	m.atStart = 0
	for _, b := range perRail {
		m.atStart += b
	}
}

// message records an n-byte message complete at at.
func (m *meter) message(n int, at time.Time) {
	m.messages++
	m.bytes += int64(n)
	m.last = at
}

// result measures the goodput of the bytes counted after the first look
// that saw some, over the time from that look to the end of the last
// message; the duration is that interval, stretched back by the time the
// bytes counted before it took at the same rate (the transport counts a
// segment once it is whole, so the first byte's time itself is not
// seen). Rail i's goodput comes from its counter in st the same way.
func (m *meter) result(st multirail.Stats) ServeResult {
	r := ServeResult{Messages: m.messages, Bytes: m.bytes}
	after := float64(m.bytes) - float64(m.atStart)
	d := 0.0
	if !m.start.IsZero() && m.last.After(m.start) && after > 0 {
		d = m.last.Sub(m.start).Seconds()
		r.GoodputBps = after * 8 / d
		r.DurationS = float64(m.bytes) * 8 / r.GoodputBps
	}
	for i, rs := range st.Rails {
		rr := RailResult{Name: rs.Name}
		if d > 0 {
			b := rs.BytesReceived
			if i < len(m.railsAtStart) {
				b -= min(b, m.railsAtStart[i])
			}
			rr.GoodputBps = float64(b) * 8 / d
		}
		r.Rails = append(r.Rails, rr)
	}
	return r
}

// ReceiveAll receives on c until the peer closes and measures the goodput
// over the interval the bytes took, from the first payload byte to the
// end of the last message. (Starting at the first complete message
// instead leaves out the time that the bytes of every message then in
// flight took, while counting those bytes: with 16 MiB in flight a 10 s
// run reads 4 % high.) The transport counts a segment's bytes once the
// segment is whole, so the first byte's time is not seen: ReceiveAll
// looks at c's counters every millisecond until they move, measures the
// goodput of the bytes counted after that look, and stretches the
// interval back by the time the bytes counted before it took at that
// rate. c must not have received payload before the call (a connection
// fresh from Accept).
func ReceiveAll(ctx context.Context, c *multirail.Conn) (ServeResult, error) {
	var (
		mu   sync.Mutex
		m    meter
		stop = make(chan struct{})
		wg   sync.WaitGroup
	)
	start := time.Now()
	wg.Add(1)
	go func() {
		defer wg.Done()
		watchCounters(c, stop, func(at time.Time, perRail []uint64) {
			mu.Lock()
			m.counted(at, perRail)
			mu.Unlock()
		})
	}()
	err := Receive(ctx, c, func(msg multirail.Message, at time.Time) error {
		mu.Lock()
		m.message(len(msg.Data), at)
		mu.Unlock()
		return nil
	})
	close(stop)
	wg.Wait()
	if err != nil {
		return ServeResult{}, err
	}
	if m.start.IsZero() || m.atStart >= uint64(m.bytes) {
		// Everything arrived between two looks: measure from the call.
		m.start, m.atStart, m.railsAtStart = time.Time{}, 0, nil
		m.counted(start, nil)
	}
	return m.result(c.Stats()), nil
}

// watchCounters looks at c's received-byte counters every pollEvery until
// they move or stop closes, then calls found with the time just before
// that look and the counts it saw per rail.
func watchCounters(c *multirail.Conn, stop <-chan struct{}, found func(at time.Time, perRail []uint64)) {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		at := time.Now()
		per, n := Received(c.Stats())
		if n > 0 {
			found(at, per)
			return
		}
		select {
		case <-tick.C:
		case <-stop:
			return
		}
	}
}

// SendFor sends size-byte messages on c for d with window Sends in flight
// and measures goodput from the acknowledged bytes (a Send of a large
// message returns once the peer holds all of it). dispatch is c's
// Config.DispatchInterval, for the record.
func SendFor(ctx context.Context, c *multirail.Conn, size int, d time.Duration, window int, dispatch time.Duration) (Result, error) {
	r := Result{Sched: c.Stats().Scheduler.Name, Size: size, DispatchS: dispatch.Seconds()}
	msg := Payload(size)
	start := time.Now()
	base := c.Stats()
	var (
		mu  sync.Mutex
		lat []float64
	)
	_, err := SendWindow(ctx, c, msg, SendOptions{
		Window: window, Until: start.Add(d),
		OnDone: func(_ int, _ time.Time, took time.Duration) {
			mu.Lock()
			lat = append(lat, took.Seconds())
			mu.Unlock()
		},
	})
	el := time.Since(start)
	if err != nil {
		return r, err
	}
	st := c.Stats()
	r.DurationS = el.Seconds()
	r.Messages = len(lat)
	r.GoodputBps = float64(r.Messages) * float64(size) * 8 / el.Seconds()
	var sent uint64
	for i := range st.Rails {
		sent += st.Rails[i].BytesSent - base.Rails[i].BytesSent
	}
	for i, rs := range st.Rails {
		share := 0.0
		if sent > 0 {
			share = float64(rs.BytesSent-base.Rails[i].BytesSent) / float64(sent)
		}
		r.Rails = append(r.Rails, RailResult{Name: rs.Name, GoodputBps: share * r.GoodputBps})
	}
	r.LatencyP50, r.LatencyP99 = measure.Percentile(lat, 0.5), measure.Percentile(lat, 0.99)
	r.AddSchedulerStats(st)
	return r, nil
}

// Received is the payload bytes received per rail, and in all, in st.
func Received(st multirail.Stats) (perRail []uint64, total uint64) {
	perRail = make([]uint64, len(st.Rails))
	for i, r := range st.Rails {
		perRail[i] = r.BytesReceived
		total += r.BytesReceived
	}
	return perRail, total
}
