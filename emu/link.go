package emu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/multirail/multirail/internal/fifo"
)

// ChunkSize is the largest piece the proxy reads and forwards at once.
const ChunkSize = 16 << 10

// dialTimeout bounds how long a Link waits to connect to its target.
const dialTimeout = 10 * time.Second

// LinkConfig configures a Link. The zero value of every field but RateBps
// means "default".
type LinkConfig struct {
	RateBps float64       // bits per second in each direction, > 0 and <= 100gbit
	Delay   time.Duration // one-way delay, >= 0 and <= 10s
	Loads   []Load        // background-load steps for this link (Rail field ignored)
	Epoch   time.Time     // time origin of the load schedule; zero = when NewLink is called
	Burst   int           // token-bucket burst in bytes; 0 = DefaultBurst(RateBps)
	Logger  *slog.Logger  // nil = discard
}

// validate fills the defaults of c in and checks it; the error names the
// field, its value and what is allowed. Epoch's default is the time of
// the call (NewLink's).
func (c *LinkConfig) validate() error {
	if !(c.RateBps > 0) || c.RateBps > MaxRateBps {
		return fmt.Errorf("emu: LinkConfig.RateBps = %v out of range; allowed: > 0 and <= %g bits/s (100gbit)", c.RateBps, float64(MaxRateBps))
	}
	if c.Delay < 0 || c.Delay > MaxDelay {
		return fmt.Errorf("emu: LinkConfig.Delay = %v out of range; allowed: >= 0 and <= %v", c.Delay, MaxDelay)
	}
	if c.Burst < 0 {
		return fmt.Errorf("emu: LinkConfig.Burst = %d out of range; allowed: >= 0 bytes (0 = default)", c.Burst)
	}
	for i, l := range c.Loads {
		if !(l.Fraction >= 0 && l.Fraction < 1) {
			return fmt.Errorf("emu: LinkConfig.Loads[%d].Fraction = %v out of range; allowed: [0,1)", i, l.Fraction)
		}
		if l.At < 0 {
			return fmt.Errorf("emu: LinkConfig.Loads[%d].At = %v out of range; allowed: >= 0", i, l.At)
		}
	}
	if c.Burst == 0 {
		c.Burst = DefaultBurst(c.RateBps)
	}
	if c.Epoch.IsZero() {
		c.Epoch = time.Now()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Link is a shaped loopback path: a proxy listening on 127.0.0.1:0 that
// forwards every accepted TCP connection to a target, shaping both
// directions independently with the same rate, delay and load profile
// (a full-duplex link).
type Link struct {
	target  string
	cfg     LinkConfig
	profile Profile
	log     *slog.Logger
	ln      net.Listener
	epoch   atomic.Pointer[time.Time]

	// Derived sizes.
	queueLimit int // bytes held per direction in user space
	sockBuf    int // kernel socket buffer per proxied socket and direction

	ctx    context.Context // canceled by Close: aborts dials
	cancel context.CancelFunc
	wg     sync.WaitGroup // accept loop and connection handlers

	mu     sync.Mutex
	closed bool
	pairs  map[*pair]struct{}
	upCh   chan struct{} // non-nil while the link is down; closed when it comes up
}

// NewLink starts a proxy on 127.0.0.1:0 that forwards to target
// (host:port) through a link shaped as cfg says. Close it when done.
func NewLink(target string, cfg LinkConfig) (*Link, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, fmt.Errorf("emu: bad link target %q; allowed: host:port", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("emu: link listen: %w", err)
	}
	l := &Link{
		target:  target,
		cfg:     cfg,
		profile: NewProfile(cfg.RateBps, cfg.Loads),
		log:     cfg.Logger.With("link", ln.Addr().String(), "target", target),
		ln:      ln,
		pairs:   make(map[*pair]struct{}),
	}
	epoch := cfg.Epoch
	l.epoch.Store(&epoch)
	bytesPerSec := cfg.RateBps / 8
	l.queueLimit = max(64<<10, int(min(bytesPerSec*(cfg.Delay+2*time.Millisecond).Seconds(), 1<<30)))
	l.sockBuf = max(32<<10, int(min(bytesPerSec*0.010, 4<<20)))
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.wg.Add(1)
	go l.acceptLoop()
	l.log.Debug("emu link up", "rate_bps", cfg.RateBps, "delay", cfg.Delay, "loads", len(cfg.Loads))
	return l, nil
}

// Addr returns the host:port to dial instead of the target.
func (l *Link) Addr() string { return l.ln.Addr().String() }

// SetEpoch restarts the load schedule's clock at t (e.g. when a benchmark
// starts). Shaping state (credit and debt) carries over.
func (l *Link) SetEpoch(t time.Time) { l.epoch.Store(&t) }

// Epoch returns the load schedule's current time origin.
func (l *Link) Epoch() time.Time { return *l.epoch.Load() }

// Profile returns the link's capacity profile (one direction).
func (l *Link) Profile() Profile { return l.profile }

// Capacity returns the mean rate in bits per second offered in one
// direction over [from, to), per the load profile relative to the epoch.
func (l *Link) Capacity(from, to time.Time) float64 {
	ep := l.Epoch()
	return l.profile.MeanRate(from.Sub(ep), to.Sub(ep))
}

// Close closes the listener and all proxied connections and waits for the
// link's goroutines to end. It is safe to call more than once.
func (l *Link) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	err := l.ln.Close()
	l.cancel()
	for p := range l.pairs {
		p.abort(false)
	}
	l.mu.Unlock()
	l.wg.Wait()
	l.log.Debug("emu link closed")
	return err
}

// SetDown takes the link down (true) or brings it back up (false), like
// unplugging a cable: while down, nothing crosses the link in either
// direction and new connections are accepted but not connected through;
// bytes already on their way wait, as TCP's retransmissions would, and
// flow once the link is up again. No endpoint sees an error.
func (l *Link) SetDown(down bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case down && l.upCh == nil:
		l.upCh = make(chan struct{})
		l.log.Debug("emu link down")
	case !down && l.upCh != nil:
		close(l.upCh)
		l.upCh = nil
		l.log.Debug("emu link up")
	}
}

// waitUp returns at once while the link is up; while it is down it waits
// until it comes up (true) or done is closed (false).
func (l *Link) waitUp(done <-chan struct{}) bool {
	l.mu.Lock()
	up := l.upCh
	l.mu.Unlock()
	if up == nil {
		return true
	}
	select {
	case <-up:
		return true
	case <-done:
		return false
	}
}

// BreakAll abruptly closes all current proxied connections (with a TCP
// reset where the platform allows), for failure tests. Both endpoints of
// each connection see an error. The listener keeps accepting.
func (l *Link) BreakAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for p := range l.pairs {
		p.abort(true)
	}
}

func (l *Link) acceptLoop() {
	defer l.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		c, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || l.ctx.Err() != nil {
				return
			}
			l.log.Warn("emu link accept", "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
			case <-l.ctx.Done():
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		l.wg.Add(1)
		go l.handle(c.(*net.TCPConn))
	}
}

// handle connects an accepted connection to the target and runs the pair
// until both directions are done.
func (l *Link) handle(client *net.TCPConn) {
	defer l.wg.Done()
	if !l.waitUp(l.ctx.Done()) {
		_ = client.Close()
		return
	}
	ctx, cancel := context.WithTimeout(l.ctx, dialTimeout)
	var d net.Dialer
	sc, err := d.DialContext(ctx, "tcp", l.target)
	cancel()
	if err != nil {
		l.log.Debug("emu link dial", "err", err)
		_ = client.SetLinger(0)
		_ = client.Close()
		return
	}
	server := sc.(*net.TCPConn)
	for _, c := range []*net.TCPConn{client, server} {
		_ = c.SetReadBuffer(l.sockBuf)
		_ = c.SetWriteBuffer(l.sockBuf)
		_ = c.SetNoDelay(true)
	}
	p := &pair{link: l, a: client, b: server, done: make(chan struct{})}
	up := p.newDir(client, server)   // client -> target
	down := p.newDir(server, client) // target -> client
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		_ = client.Close()
		_ = server.Close()
		return
	}
	l.pairs[p] = struct{}{}
	l.mu.Unlock()
	l.log.Debug("emu link connection", "client", client.RemoteAddr().String())

	var wg sync.WaitGroup
	for _, d := range []*direction{up, down} {
		wg.Add(2)
		go func() { defer wg.Done(); d.readLoop() }()
		go func() { defer wg.Done(); d.writeLoop() }()
	}
	wg.Wait()
	_ = client.Close()
	_ = server.Close()
	l.mu.Lock()
	delete(l.pairs, p)
	l.mu.Unlock()
	l.log.Debug("emu link connection done", "client", client.RemoteAddr().String())
}

// pair is one proxied connection: the accepted client side a and the
// dialed target side b.
type pair struct {
	link *Link
	a, b *net.TCPConn
	once sync.Once
	done chan struct{}
	dirs []*direction
}

// abort ends the pair at once: both sockets are closed (with a reset if
// rst) and every goroutine of the pair unblocks.
func (p *pair) abort(rst bool) {
	p.once.Do(func() {
		close(p.done)
		for _, d := range p.dirs {
			d.q.stop()
		}
		if rst {
			_ = p.a.SetLinger(0)
			_ = p.b.SetLinger(0)
		}
		_ = p.a.Close()
		_ = p.b.Close()
	})
}

// direction is one way of a pair: bytes read from src are queued, delayed,
// paced and written to dst.
type direction struct {
	p        *pair
	src, dst *net.TCPConn
	q        *queue
	bucket   *Bucket
}

func (p *pair) newDir(src, dst *net.TCPConn) *direction {
	l := p.link
	d := &direction{
		p: p, src: src, dst: dst,
		q:      newQueue(l.queueLimit),
		bucket: NewBucket(l.profile, l.cfg.Burst),
	}
	p.dirs = append(p.dirs, d)
	return d
}

var chunkPool = sync.Pool{New: func() any { b := make([]byte, ChunkSize); return &b }}

func putChunk(bp *[]byte) {
	if bp != nil && len(*bp) == ChunkSize {
		chunkPool.Put(bp)
	}
}

type chunk struct {
	buf *[]byte
	n   int
	at  time.Time // arrival at the proxy
}

// quickRead is how fast a Read must return for its data to count as
// having been waiting in the kernel already.
const quickRead = 200 * time.Microsecond

// readLoop reads chunks from src into the queue, each stamped with its
// time of arrival on the link.
//
// A chunk read at once after the reader had to wait for room (the link
// was backlogged) was waiting in the kernel, and so were the chunks read
// at once after it, as long as every read fills its buffer: they all
// belong to one backlog, which began when the reader first had to wait.
// They are stamped with that time, so that the pacing treats the link as
// busy throughout and a writer that woke up late (and so held up the
// reads) costs the link no capacity. A read that blocks or comes back
// short ends the backlog.
func (d *direction) readLoop() {
	var backlog time.Time // start of the current backlog; zero if none
	for {
		waitStart, ok := d.q.waitRoom()
		if !ok {
			return
		}
		bp := chunkPool.Get().(*[]byte)
		readStart := time.Now()
		n, err := d.src.Read(*bp)
		at := time.Now()
		switch {
		case at.Sub(readStart) >= quickRead:
			backlog = time.Time{}
		case backlog.IsZero() && !waitStart.IsZero():
			backlog = waitStart
		}
		if !backlog.IsZero() {
			at = backlog
		}
		if n < len(*bp) {
			backlog = time.Time{}
		}
		if n > 0 {
			d.q.push(chunk{buf: bp, n: n, at: at})
		} else {
			putChunk(bp)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				d.q.finish(nil)
			} else {
				d.q.finish(err)
			}
			return
		}
	}
}

func (d *direction) writeLoop() {
	l := d.p.link
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	sleep := func(w time.Duration) bool {
		timer.Reset(w)
		select {
		case <-timer.C:
			return true
		case <-d.p.done:
			timer.Stop()
			return false
		}
	}
	epoch := l.Epoch()
	for {
		c, ok, err := d.q.pop()
		if !ok {
			if err != nil || d.q.stopped() {
				// The source failed: make the other end see a failure too,
				// not a clean end of stream.
				d.p.abort(true)
				return
			}
			if cerr := d.dst.CloseWrite(); cerr != nil {
				d.p.abort(true)
			}
			return
		}
		if ep := l.Epoch(); !ep.Equal(epoch) {
			d.bucket.Rebase(epoch.Sub(ep))
			epoch = ep
		}
		// The chunk is serialised at the link's rate from its arrival on
		// (the bucket), then crosses the wire (the delay). Reserve works on
		// the chunk's arrival, not on the time this goroutine woke up, so
		// oversleeping loses no capacity: a late writer catches up.
		release := d.bucket.Reserve(c.at.Sub(epoch), c.n) + l.cfg.Delay
		if w := release - time.Since(epoch); w > 0 && !sleep(w) {
			d.q.release(c)
			return
		}
		if !l.waitUp(d.p.done) {
			d.q.release(c)
			return
		}
		_, err = d.dst.Write((*c.buf)[:c.n])
		d.q.release(c)
		if err != nil {
			d.p.abort(true)
			return
		}
	}
}

// queue is the bounded FIFO of chunks between a direction's reader and
// writer. It holds at most about limit bytes, so that TCP back-pressure
// reaches the sender.
type queue struct {
	mu      sync.Mutex
	cond    sync.Cond
	items   fifo.Queue[chunk]
	held    int // bytes queued or being written
	limit   int
	eof     bool  // reader finished
	err     error // reader's error, if any
	aborted bool
}

func newQueue(limit int) *queue {
	q := &queue{limit: limit}
	q.cond.L = &q.mu
	return q
}

// waitRoom blocks until the queue has room. It returns when it began to
// wait (zero if it did not) and false if the queue was stopped.
func (q *queue) waitRoom() (since time.Time, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.held >= q.limit && !q.aborted {
		since = time.Now()
		for q.held >= q.limit && !q.aborted {
			q.cond.Wait()
		}
	}
	return since, !q.aborted
}

func (q *queue) push(c chunk) {
	q.mu.Lock()
	if q.aborted {
		q.mu.Unlock()
		putChunk(c.buf)
		return
	}
	q.items.Push(c)
	q.held += c.n
	q.mu.Unlock()
	q.cond.Broadcast()
}

func (q *queue) finish(err error) {
	q.mu.Lock()
	q.eof = true
	q.err = err
	q.mu.Unlock()
	q.cond.Broadcast()
}

func (q *queue) stop() {
	q.mu.Lock()
	q.aborted = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

func (q *queue) stopped() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.aborted
}

// pop returns the next chunk; ok is false once the reader has finished and
// everything was popped (err is the reader's error) or the queue was
// stopped.
func (q *queue) pop() (c chunk, ok bool, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.items.Len() == 0 && !q.eof && !q.aborted {
		q.cond.Wait()
	}
	if q.aborted {
		return chunk{}, false, nil
	}
	if q.items.Len() == 0 {
		return chunk{}, false, q.err
	}
	return q.items.Pop(), true, nil
}

// release returns a popped chunk's room and buffer.
func (q *queue) release(c chunk) {
	q.mu.Lock()
	q.held -= c.n
	q.mu.Unlock()
	q.cond.Broadcast()
	putChunk(c.buf)
}
