package multirail

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	hs "github.com/multirail/multirail/internal/handshake"
	"github.com/multirail/multirail/internal/wire"
	"github.com/multirail/multirail/sched"
)

// RailError says which rail failed to join and why.
type RailError struct {
	Rail string
	Err  error
}

func (e *RailError) Error() string { return fmt.Sprintf("rail %s: %v", e.Rail, e.Err) }
func (e *RailError) Unwrap() error { return e.Err }

// Dial opens a connection over every rail in cfg.Rails. All rails join one
// session; Dial fails, naming the rail, if any of them cannot be opened or
// authenticated within cfg.HandshakeTimeout.
func Dial(ctx context.Context, cfg Config) (*Conn, error) {
	c, err := cfg.validate(true)
	if err != nil {
		return nil, err
	}
	var session [16]byte
	_, _ = rand.Read(session[:])
	deadline := time.Now().Add(c.HandshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	type result struct {
		conn net.Conn
		ch   wire.Challenge
		keys *hs.Keys
		err  error
	}
	results := make([]result, len(c.Rails))
	// The first rail's handshake, under the token, yields the session
	// key; the other rails then join under that key, all at once.
	first := &results[0]
	first.conn, first.ch, first.keys, first.err = dialRail(ctx, c, c.Rails[0], 0, session, deadline, c.helloFlags(0), hs.TokenKey(c.token))
	if first.err == nil && int(first.ch.SegmentSize) > c.MaxPeerSegmentSize {
		_ = first.conn.Close()
		first.conn = nil
		first.err = fmt.Errorf("multirail: the acceptor's segment size %d is above this side's limit %d (MaxPeerSegmentSize)", first.ch.SegmentSize, c.MaxPeerSegmentSize)
	}
	if first.err == nil {
		var wg sync.WaitGroup
		for i := 1; i < len(c.Rails); i++ {
			wg.Go(func() {
				res := &results[i]
				res.conn, res.ch, res.keys, res.err = dialRail(ctx, c, c.Rails[i], i, session, deadline, c.helloFlags(wire.HelloJoin), first.keys.Session)
			})
		}
		wg.Wait()
	}
	var firstErr error
	for i, res := range results {
		if res.err != nil && firstErr == nil {
			firstErr = &RailError{Rail: c.Rails[i].Name, Err: res.err}
		}
	}
	if firstErr == nil {
		ch0 := results[0].ch
		for i, res := range results {
			if res.ch != ch0 || res.keys.Plaintext != first.keys.Plaintext {
				firstErr = &RailError{Rail: c.Rails[i].Name, Err: fmt.Errorf("%w: parameters differ between rails", wire.ErrMalformed)}
			}
		}
	}
	if firstErr == nil {
		// The acceptor welcomes every rail once all have joined.
		var wg sync.WaitGroup
		for i := range results {
			wg.Go(func() {
				res := &results[i]
				stop := context.AfterFunc(ctx, func() { _ = res.conn.SetDeadline(time.Unix(1, 0)) })
				res.err = hs.WaitWelcome(res.conn, res.keys, deadline)
				if !stop() && ctx.Err() != nil {
					res.err = ctx.Err()
				}
			})
		}
		wg.Wait()
		for i, res := range results {
			if res.err != nil && firstErr == nil {
				firstErr = &RailError{Rail: c.Rails[i].Name, Err: res.err}
			}
		}
	}
	if firstErr != nil {
		for _, res := range results {
			if res.conn != nil {
				_ = res.conn.Close()
			}
		}
		return nil, firstErr
	}
	sch, err := c.newScheduler(len(c.Rails))
	if err != nil {
		return nil, err
	}
	inits := make([]railInit, len(c.Rails))
	for i, r := range c.Rails {
		inits[i] = railInit{c: results[i].conn, name: r.Name, nominal: r.Bandwidth, keys: results[i].keys}
	}
	ch := results[0].ch
	key := first.keys.Session
	peer := peerParams{seg: int(ch.SegmentSize), window: ch.Window, maxMsg: ch.MaxMessage}
	redial := func(ctx context.Context, idx int) (net.Conn, *hs.Keys, error) {
		deadline := time.Now().Add(c.HandshakeTimeout)
		conn, rch, keys, err := dialRail(ctx, c, c.Rails[idx], idx, session, deadline, c.helloFlags(wire.HelloRejoin), key)
		if err != nil {
			return nil, nil, err
		}
		if rch != ch || keys.Plaintext != first.keys.Plaintext {
			_ = conn.Close()
			return nil, nil, fmt.Errorf("%w: the peer's parameters changed", wire.ErrMalformed)
		}
		if err := hs.WaitWelcome(conn, keys, deadline); err != nil {
			_ = conn.Close()
			return nil, nil, err
		}
		return conn, keys, nil
	}
	return newConn(c, session, key, inits, peer, sch, connHooks{redial: redial})
}

// helloFlags adds HelloPlaintext to flags when the configuration asks for
// frames in clear.
func (c config) helloFlags(flags uint8) uint8 {
	if c.Plaintext {
		flags |= wire.HelloPlaintext
	}
	return flags
}

// dialRail opens rail idx of the session and runs the dialing side of its
// handshake up to its AUTH, under the pre-shared key psk; flags holds
// wire.HelloJoin or wire.HelloRejoin for a rail other than a new session's
// first.
func dialRail(ctx context.Context, c config, r Rail, idx int, session [16]byte, deadline time.Time, flags uint8, psk [32]byte) (net.Conn, wire.Challenge, *hs.Keys, error) {
	connectBy := deadline
	if flags&wire.HelloRejoin != 0 {
		connectBy = time.Now().Add(min(rejoinConnectTimeout, c.HandshakeTimeout))
	}
	dctx, cancel := context.WithDeadline(ctx, connectBy)
	var conn net.Conn
	var err error
	if c.DialRail != nil {
		conn, err = c.DialRail(dctx, r)
	} else {
		var d net.Dialer
		if r.Local != "" {
			d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(r.Local)}
		}
		conn, err = d.DialContext(dctx, "tcp", r.Addr)
	}
	cancel()
	if err != nil {
		return nil, wire.Challenge{}, nil, err
	}
	hello := wire.Hello{
		Version: wire.Version, Flags: flags, Rail: uint16(idx), Rails: uint16(len(c.Rails)), Session: session,
		SegmentSize: uint32(c.SegmentSize), Window: uint64(c.MaxReceiveBuffer), MaxMessage: uint64(c.MaxMessageSize),
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	ch, keys, err := hs.Dial(conn, hello, psk, deadline)
	if !stop() && err == nil {
		err = ctx.Err() // cancelled as the handshake ended: the deadline was cut short
	}
	if err != nil {
		_ = conn.Close()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, ch, nil, err
	}
	return conn, ch, keys, nil
}

// Listener accepts multi-rail connections. Every rail of a peer's
// connection connects to the same listening address.
type Listener struct {
	cfg   config
	ln    net.Listener
	slots chan struct{} // bounds concurrent handshakes
	conns chan *Conn

	mu       sync.Mutex
	sessions map[[16]byte]*pending
	live     map[[16]byte]*Conn // open connections, for rails that rejoin (nil: starting)
	perHost  map[netip.Addr]int // handshakes in progress per source address (IPv6: per /64)
	closed   bool
	done     chan struct{}
	wg       sync.WaitGroup
}

// pending is a session whose rails are still joining.
type pending struct {
	rails     []net.Conn
	keys      []*hs.Keys
	hello     wire.Hello // its first rail's
	key       [32]byte   // the session key
	plaintext bool
	n         int
	timer     *time.Timer
}

// Listen listens for multi-rail connections on the TCP address addr
// ("host:port"; port 0 picks one). cfg.Rails is optional here: when given,
// rail i's Bandwidth is used for the reverse direction's scheduler.
func Listen(addr string, cfg Config) (*Listener, error) {
	c, err := cfg.validate(false)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return newListener(ln, c), nil
}

// NewListener accepts multi-rail connections on ln, which it owns from
// now on (Close closes it): a listener the caller made (a socket with
// options of its own, an inherited file descriptor) or an in-memory one
// for tests. With Config.DialRail on the other side, rails need not be TCP
// at all; what is not TCP skips the socket tuning.
func NewListener(ln net.Listener, cfg Config) (*Listener, error) {
	c, err := cfg.validate(false)
	if err != nil {
		return nil, err
	}
	return newListener(ln, c), nil
}

func newListener(ln net.Listener, c config) *Listener {
	l := &Listener{cfg: c, ln: ln, slots: make(chan struct{}, c.MaxHandshakes), conns: make(chan *Conn, 16),
		sessions: make(map[[16]byte]*pending), live: make(map[[16]byte]*Conn), perHost: make(map[netip.Addr]int), done: make(chan struct{})}
	l.wg.Add(1)
	go l.acceptLoop()
	return l
}

// Addr is the listening address.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Accept waits for the next connection whose rails have all joined.
func (l *Listener) Accept(ctx context.Context) (*Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.done:
		return nil, ErrClosed
	}
}

// Close stops listening, drops sessions still joining and connections not
// yet accepted. Accepted connections are not affected.
func (l *Listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.done)
	for id, p := range l.sessions {
		l.dropLocked(id, p)
	}
	l.mu.Unlock()
	err := l.ln.Close()
	l.wg.Wait()
	for {
		select {
		case c := <-l.conns:
			_ = c.Close()
		default:
			return err
		}
	}
}

func (l *Listener) acceptLoop() {
	defer l.wg.Done()
	log := l.cfg.Logger
	for {
		conn, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			log.Warn("accept failed", "err", err)
			select {
			case <-l.done:
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		// One source address may hold at most perHostMax of the slots, so
		// that a flood of half-open connections from one host does not lock
		// everyone else out.
		host := hostKey(conn.RemoteAddr())
		l.mu.Lock()
		over := l.perHost[host] >= l.perHostMax()
		if !over {
			l.perHost[host]++
		}
		l.mu.Unlock()
		if over {
			log.Warn("too many handshakes from one address; connection dropped", "peer", conn.RemoteAddr(), "max", l.perHostMax())
			_ = conn.Close()
			continue
		}
		select {
		case l.slots <- struct{}{}:
		default:
			l.doneHost(host)
			log.Warn("too many handshakes in progress; connection dropped", "peer", conn.RemoteAddr(), "max", l.cfg.MaxHandshakes)
			_ = conn.Close()
			continue
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer l.doneHost(host)
			defer func() { <-l.slots }()
			l.handshake(conn)
		}()
	}
}

// perHostMax is how many handshakes one source address may run at once:
// enough for a session of MaxRails rails dialed from one address.
func (l *Listener) perHostMax() int { return min(MaxRails, l.cfg.MaxHandshakes) }

// doneHost counts a handshake from host as finished.
func (l *Listener) doneHost(host netip.Addr) {
	l.mu.Lock()
	if l.perHost[host]--; l.perHost[host] <= 0 {
		delete(l.perHost, host)
	}
	l.mu.Unlock()
}

// hostKey is the source address a handshake counts against: the IP
// address, or its /64 for IPv6 (one host usually holds a whole /64).
func hostKey(a net.Addr) netip.Addr {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	ip := ap.Addr().Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.Addr()
	}
	return ip
}

func (l *Listener) handshake(conn net.Conn) {
	log := l.cfg.Logger
	ch := wire.Challenge{SegmentSize: uint32(l.cfg.SegmentSize), Window: uint64(l.cfg.MaxReceiveBuffer), MaxMessage: uint64(l.cfg.MaxMessageSize)}
	// Closing the listener interrupts the handshake; once the rail has
	// passed it, nothing may touch its deadlines any more (it may become
	// a rail of a live session at once).
	stop := context.AfterFunc(doneCtx{l.done}, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	var created *pending
	a := hs.Acceptor{
		Key:       func(h wire.Hello) ([32]byte, error) { return l.keyFor(conn, h) },
		Plaintext: l.cfg.Plaintext,
		Keyed: func(h wire.Hello, k *hs.Keys) (err error) {
			created, err = l.keyed(conn, h, k)
			return err
		},
	}
	hello, keys, err := hs.Accept(conn, a, ch, time.Now().Add(l.cfg.HandshakeTimeout))
	if !stop() && err == nil {
		err = ErrClosed // the listener closed: the deadline was cut short
	}
	if err != nil {
		if created != nil {
			// A first rail that did not complete (a recorded HELLO
			// replayed, say) leaves no session behind.
			l.mu.Lock()
			if l.sessions[hello.Session] == created && created.n == 0 {
				l.dropLocked(hello.Session, created)
			}
			l.mu.Unlock()
		}
		log.Warn("handshake failed; connection closed", "peer", conn.RemoteAddr(), "err", err)
		_ = conn.Close()
		return
	}
	l.join(conn, hello, keys)
}

// keyFor picks the pre-shared key of a rail's handshake from its HELLO's
// clear part: the token's for a new session; for a rail that joins or
// rejoins, the key of the session it names, which must be joining or
// open.
func (l *Listener) keyFor(conn net.Conn, h wire.Hello) ([32]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return [32]byte{}, ErrClosed
	case h.Flags&wire.HelloRejoin != 0:
		if c := l.live[h.Session]; c != nil {
			return c.key, nil
		}
		return [32]byte{}, &hs.RejectedError{Code: wire.RejectSession, Reason: "no open session with this id"}
	case h.Flags&wire.HelloJoin != 0:
		if p := l.sessions[h.Session]; p != nil {
			return p.key, nil
		}
		return [32]byte{}, &hs.RejectedError{Code: wire.RejectSession, Reason: "no session joining with this id"}
	}
	if err := l.newSessionLocked(conn, h); err != nil {
		return [32]byte{}, err
	}
	return hs.TokenKey(l.cfg.token), nil
}

// newSessionLocked refuses a new session whose id is in use or that
// would exceed MaxSessions. Caller holds l.mu.
func (l *Listener) newSessionLocked(conn net.Conn, h wire.Hello) error {
	log := l.cfg.Logger
	if _, inUse := l.live[h.Session]; inUse || l.sessions[h.Session] != nil {
		// Session ids are random (128 bits): a new session with the id of
		// one joining or open is a replay or a token holder trying to
		// take its place.
		log.Warn("new session with the id of an open one; connection closed", "peer", conn.RemoteAddr(), "session", fmt.Sprintf("%x", h.Session[:4]))
		return &hs.RejectedError{Code: wire.RejectSession, Reason: "session id in use"}
	}
	if n := len(l.live) + len(l.sessions); n >= l.cfg.MaxSessions {
		log.Warn("session limit reached; new session refused", "peer", conn.RemoteAddr(), "sessions", n, "max", l.cfg.MaxSessions)
		return &hs.RejectedError{Code: wire.RejectBusy, Reason: fmt.Sprintf("%d sessions open, the listener's limit (MaxSessions)", n)}
	} else if int64(n+1) > l.cfg.MaxListenerBuffer/l.cfg.MaxReceiveBuffer {
		log.Warn("memory budget reached; new session refused", "peer", conn.RemoteAddr(), "sessions", n, "window", l.cfg.MaxReceiveBuffer, "budget", l.cfg.MaxListenerBuffer)
		return &hs.RejectedError{Code: wire.RejectBusy, Reason: fmt.Sprintf("%d sessions of %d-byte windows open, the listener's memory budget is %d bytes (MaxListenerBuffer)", n, l.cfg.MaxReceiveBuffer, l.cfg.MaxListenerBuffer)}
	}
	return nil
}

// keyed registers a new session's key once its first rail's handshake
// derived it, so that the session's other rails can join under it. It
// returns the session it created (nil for a join or rejoin).
func (l *Listener) keyed(conn net.Conn, h wire.Hello, k *hs.Keys) (*pending, error) {
	if int(h.SegmentSize) > l.cfg.MaxPeerSegmentSize {
		l.cfg.Logger.Warn("peer's segment size above MaxPeerSegmentSize; connection closed", "peer", conn.RemoteAddr(), "segment", h.SegmentSize, "max", l.cfg.MaxPeerSegmentSize)
		return nil, &hs.RejectedError{Code: wire.RejectProtocol, Reason: fmt.Sprintf("segment size %d above this side's limit %d (MaxPeerSegmentSize)", h.SegmentSize, l.cfg.MaxPeerSegmentSize)}
	}
	if h.Flags&(wire.HelloJoin|wire.HelloRejoin) != 0 {
		return nil, nil
	}
	if h.Rail != 0 {
		return nil, &hs.RejectedError{Code: wire.RejectProtocol, Reason: fmt.Sprintf("a new session starts with rail 0, not %d", h.Rail)}
	}
	if int(h.Rails) > MaxRails {
		return nil, &hs.RejectedError{Code: wire.RejectProtocol, Reason: fmt.Sprintf("%d rails announced, at most %d allowed", h.Rails, MaxRails)}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	if err := l.newSessionLocked(conn, h); err != nil {
		return nil, err
	}
	p := &pending{rails: make([]net.Conn, h.Rails), keys: make([]*hs.Keys, h.Rails), hello: h, key: k.Session, plaintext: k.Plaintext}
	l.sessions[h.Session] = p
	id := h.Session
	log := l.cfg.Logger
	p.timer = time.AfterFunc(l.cfg.HandshakeTimeout, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.sessions[id] == p {
			log.Warn("session incomplete after the handshake timeout; dropped", "joined", p.n, "rails", len(p.rails))
			l.dropLocked(id, p)
		}
	})
	return p, nil
}

// join adds an authenticated rail to its session; the last rail completes
// the session and hands the connection to Accept.
func (l *Listener) join(conn net.Conn, h wire.Hello, keys *hs.Keys) {
	log := l.cfg.Logger
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		_ = conn.Close()
		return
	}
	if h.Flags&wire.HelloRejoin != 0 {
		c := l.live[h.Session]
		l.mu.Unlock()
		l.rejoin(conn, h, keys, c)
		return
	}
	p := l.sessions[h.Session]
	if p == nil {
		l.mu.Unlock()
		log.Warn("rail of a session no longer joining; connection closed", "peer", conn.RemoteAddr(), "rail", h.Rail)
		hs.Reject(conn, wire.RejectSession, "session no longer joining")
		_ = conn.Close()
		return
	}
	if h.Rails != p.hello.Rails || h.SegmentSize != p.hello.SegmentSize || h.Window != p.hello.Window || h.MaxMessage != p.hello.MaxMessage ||
		p.rails[h.Rail] != nil || keys.Plaintext != p.plaintext {
		l.mu.Unlock()
		log.Warn("rail inconsistent with its session; connection closed", "peer", conn.RemoteAddr(), "rail", h.Rail)
		hs.Reject(conn, wire.RejectSession, "rail inconsistent with its session")
		_ = conn.Close()
		return
	}
	p.rails[h.Rail] = conn
	p.keys[h.Rail] = keys
	p.n++
	if p.n < len(p.rails) {
		l.mu.Unlock()
		return
	}
	p.timer.Stop()
	delete(l.sessions, h.Session)
	id := h.Session
	l.live[id] = nil // reserved: the id is in use from now on
	l.mu.Unlock()
	unreserve := func() {
		l.mu.Lock()
		if l.live[id] == nil {
			delete(l.live, id)
		}
		l.mu.Unlock()
	}

	deadline := time.Now().Add(l.cfg.HandshakeTimeout)
	inits := make([]railInit, len(p.rails))
	for i, rc := range p.rails {
		inits[i] = railInit{c: rc, name: rc.RemoteAddr().String(), keys: p.keys[i]}
		if i < len(l.cfg.Rails) {
			inits[i].nominal = l.cfg.Rails[i].Bandwidth
			if l.cfg.Rails[i].Name != "" {
				inits[i].name = l.cfg.Rails[i].Name
			}
		}
	}
	sch, err := l.cfg.newScheduler(len(p.rails))
	if err != nil {
		log.Warn("scheduler unusable for the reverse direction; using the default", "scheduler", l.cfg.Scheduler, "default", DefaultScheduler, "err", err)
		sch, _ = sched.New(DefaultScheduler, sched.Config{Rails: len(p.rails), Seed: l.cfg.Seed})
	}
	for i, rc := range p.rails {
		if err := hs.Welcome(rc, p.keys[i], deadline); err != nil {
			log.Warn("welcome failed; session dropped", "err", err)
			for _, rc := range p.rails {
				_ = rc.Close()
			}
			unreserve()
			return
		}
	}
	forget := func() {
		l.mu.Lock()
		delete(l.live, id)
		l.mu.Unlock()
	}
	c, err := newConn(l.cfg, h.Session, p.key, inits, peerParams{seg: int(h.SegmentSize), window: h.Window, maxMsg: h.MaxMessage}, sch, connHooks{onClose: forget})
	if err != nil {
		log.Warn("session dropped", "err", err)
		for _, rc := range p.rails {
			_ = rc.Close()
		}
		unreserve()
		return
	}
	l.mu.Lock()
	c.mu.Lock()
	gone := c.shutting // then its onClose has run or waits for l.mu
	c.mu.Unlock()
	if !l.closed && !gone {
		l.live[id] = c
	} else if l.live[id] == nil {
		delete(l.live, id)
	}
	l.mu.Unlock()
	select {
	case l.conns <- c:
	case <-l.done:
		_ = c.Close()
	}
}

// rejoin hands an authenticated connection that asks to replace a failed
// rail to the open connection c of its session (nil if there is none).
func (l *Listener) rejoin(conn net.Conn, h wire.Hello, keys *hs.Keys, c *Conn) {
	log := l.cfg.Logger
	why := ""
	switch {
	case c == nil:
		why = "no open session with this id"
	case len(c.rails) < 2:
		why = "a single-rail session cannot replace its rail"
	case int(h.Rails) != len(c.rails) || int(h.SegmentSize) != c.peer.seg || h.Window != c.peer.window || h.MaxMessage != c.peer.maxMsg || keys.Plaintext != c.plaintext:
		why = "rail inconsistent with its session"
	}
	if why != "" {
		log.Warn("rail rejoin refused; connection closed", "peer", conn.RemoteAddr(), "rail", h.Rail, "reason", why)
		hs.Reject(conn, wire.RejectSession, why)
		_ = conn.Close()
		return
	}
	if err := hs.Welcome(conn, keys, time.Now().Add(l.cfg.HandshakeTimeout)); err != nil {
		log.Warn("welcome failed; rejoining rail closed", "peer", conn.RemoteAddr(), "rail", h.Rail, "err", err)
		_ = conn.Close()
		return
	}
	r := c.rails[h.Rail]
	if err := c.attach(r, conn, keys); err != nil {
		log.Warn("rail rejoin failed; connection closed", "peer", conn.RemoteAddr(), "rail", h.Rail, "err", err)
		_ = conn.Close()
		return
	}
	c.log.Info("rail rejoined", "rail", r.name, "peer", conn.RemoteAddr())
}

func (l *Listener) dropLocked(id [16]byte, p *pending) {
	p.timer.Stop()
	delete(l.sessions, id)
	for _, rc := range p.rails {
		if rc != nil {
			_ = rc.Close()
		}
	}
}

// doneCtx is a context that is done when ch is closed.
type doneCtx struct{ ch <-chan struct{} }

func (d doneCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (d doneCtx) Done() <-chan struct{}       { return d.ch }
func (d doneCtx) Err() error {
	select {
	case <-d.ch:
		return context.Canceled
	default:
		return nil
	}
}
func (d doneCtx) Value(any) any { return nil }
