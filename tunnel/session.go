package tunnel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/multirail/multirail"
)

// Window bounds and defaults.
const (
	// MinWindow is the smallest stream window, and the credit an opener
	// has on a new stream before the accepting side's WINDOW arrives.
	MinWindow = 256 << 10
	// MaxWindow is the largest stream window.
	MaxWindow = 1 << 30
	// DefaultWindow is Config.Window's default: 350 Mbit/s over 400 ms.
	// A stream's data arrives in order, so the window must cover the
	// slowest rail's delay, queue included, at the rate of all rails
	// together: in the lab (200/100/50 Mbit/s) iperf3 reached 98.3 % of
	// the ceiling with 4 MiB and 99.5 % with 16 MiB (BENCHMARKS.md).
	DefaultWindow = 16 << 20
	// DefaultChunkSize is Config.ChunkSize's default: with the kind byte,
	// one DATA frame is one default multirail segment (64 KiB).
	DefaultChunkSize = 64<<10 - 1
	// DefaultMaxStreams is Config.MaxStreams's default. With
	// DefaultWindow, streams whose applications stop reading can hold up
	// to 4 GiB at the receiving end.
	DefaultMaxStreams = 256
	// DefaultDialTimeout is Config.DialTimeout's default.
	DefaultDialTimeout = 10 * time.Second
)

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("tunnel: invalid config")

// ErrClosed is returned by a session's calls once it has ended.
var ErrClosed = errors.New("tunnel: session closed")

// ErrNotOpener is returned by Open on a session that accepts streams.
var ErrNotOpener = errors.New("tunnel: this session accepts streams (Config.Dial is set); it cannot open them")

// Config configures a session. The zero value of every field means its
// default.
type Config struct {
	// Dial, when set, makes the session the accepting end: every stream
	// the peer opens is connected to a new connection from Dial (the
	// tunnel's target). Nil makes it the opening end (Session.Open).
	Dial func(ctx context.Context) (net.Conn, error)
	// Window is each stream's receive window in bytes: how much the peer
	// may send on a stream before this side has written it to the
	// stream's TCP connection. It bounds the memory a stream holds and is
	// what keeps one stream whose reader is slow from holding up the
	// others. MinWindow..MaxWindow; 0 means DefaultWindow.
	Window int
	// ChunkSize is the largest payload of one DATA frame: reads from a
	// stream's TCP connection are at most this long. 1 KiB..16 MiB; 0
	// means DefaultChunkSize. The multirail.Conn's EagerLimit should be at
	// least ChunkSize+1 (ConnConfig sets it), or every frame waits for
	// its acknowledgement.
	ChunkSize int
	// MaxStreams bounds the streams open at once; the accepting end
	// resets streams beyond it, Open fails. 1..1<<20; 0 means
	// DefaultMaxStreams.
	MaxStreams int
	// DialTimeout bounds every call of Dial; 0 means DefaultDialTimeout.
	DialTimeout time.Duration
	// Logger receives the session's events; nil discards them.
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.Window < MinWindow || c.Window > MaxWindow {
		return c, fmt.Errorf("%w: Window %d: allowed %d..%d bytes", ErrConfig, c.Window, MinWindow, MaxWindow)
	}
	if c.ChunkSize == 0 {
		c.ChunkSize = DefaultChunkSize
	}
	if c.ChunkSize < 1<<10 || c.ChunkSize > 16<<20 {
		return c, fmt.Errorf("%w: ChunkSize %d: allowed 1024..%d bytes", ErrConfig, c.ChunkSize, 16<<20)
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = DefaultMaxStreams
	}
	if c.MaxStreams < 1 || c.MaxStreams > 1<<20 {
		return c, fmt.Errorf("%w: MaxStreams %d: allowed 1..%d", ErrConfig, c.MaxStreams, 1<<20)
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.DialTimeout < 0 {
		return c, fmt.Errorf("%w: DialTimeout %v: must be positive", ErrConfig, c.DialTimeout)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// ConnConfig returns base with what a tunnel needs of its multirail.Conn:
// EagerLimit and SegmentSize large enough that a DATA frame of chunkSize
// (0 = DefaultChunkSize) is sent eagerly, so that a stream has many frames
// in flight. Use it on both ends.
func ConnConfig(base multirail.Config, chunkSize int) multirail.Config {
	if chunkSize == 0 {
		chunkSize = DefaultChunkSize
	}
	need := chunkSize + 1
	if base.SegmentSize == 0 {
		base.SegmentSize = 64 << 10
	}
	base.SegmentSize = max(base.SegmentSize, need)
	if base.EagerLimit >= 0 {
		base.EagerLimit = max(base.EagerLimit, need)
	}
	return base
}

// Stats counts a session's streams and bytes.
type Stats struct {
	StreamsOpen   int    // streams open now
	StreamsOpened uint64 // streams opened since the session started
	StreamsReset  uint64 // streams ended by a reset (either side's) rather than by both FINs
	BytesSent     uint64 // stream bytes read from local connections and sent to the peer
	BytesReceived uint64 // stream bytes received from the peer
}

// Session carries TCP connections as streams over one multirail.Conn.
type Session struct {
	c      *multirail.Conn
	cfg    Config
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	streams  map[uint32]*stream
	lastID   uint32 // highest stream id opened (by either end's rule)
	err      error
	done     chan struct{}
	doneOnce sync.Once

	opened, resets, sent, received atomic.Uint64
}

// NewSession starts a tunnel session on c, which must be connected to a
// peer running a session too (one end with Config.Dial set, the other
// without). The session reads every message c receives until Close or
// until c fails; it does not close c.
func NewSession(c *multirail.Conn, cfg Config) (*Session, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Session{c: c, cfg: cfg, log: cfg.Logger, ctx: ctx, cancel: cancel,
		streams: make(map[uint32]*stream), done: make(chan struct{})}
	s.wg.Add(1)
	go s.dispatch()
	return s, nil
}

// Done is closed when the session has ended.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err is why the session ended (nil while it runs; ErrClosed after Close).
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the session: every stream's connection is reset. It waits for
// the session's goroutines and returns nil (or why the session had already
// failed).
func (s *Session) Close() error {
	s.fail(ErrClosed)
	s.wg.Wait()
	if err := s.Err(); !errors.Is(err, ErrClosed) {
		return err
	}
	return nil
}

// Stats returns the session's counters.
func (s *Session) Stats() Stats {
	s.mu.Lock()
	n := len(s.streams)
	s.mu.Unlock()
	return Stats{StreamsOpen: n, StreamsOpened: s.opened.Load(), StreamsReset: s.resets.Load(),
		BytesSent: s.sent.Load(), BytesReceived: s.received.Load()}
}

// fail ends the session with err (the first error wins).
func (s *Session) fail(err error) {
	s.doneOnce.Do(func() {
		s.mu.Lock()
		s.err = err
		all := make([]*stream, 0, len(s.streams))
		for _, st := range s.streams {
			all = append(all, st)
		}
		s.mu.Unlock()
		if !errors.Is(err, ErrClosed) {
			s.log.Warn("tunnel session ended", "err", err)
		}
		s.cancel()
		close(s.done)
		if errors.Is(err, ErrProtocol) {
			// The peer is broken: nothing more it sends can be read,
			// and it must learn that its streams are gone.
			_ = s.c.Close()
		}
		for _, st := range all {
			st.end(true, "")
		}
	})
}

// Open carries nc as a new stream: the peer connects it to its target.
// It returns once the stream is open; from then on the session owns nc and
// closes it when the stream ends. On an error nc is left open.
func (s *Session) Open(nc net.Conn) error {
	if s.cfg.Dial != nil {
		return ErrNotOpener
	}
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	if len(s.streams) >= s.cfg.MaxStreams {
		s.mu.Unlock()
		return fmt.Errorf("tunnel: %d streams open, the most Config.MaxStreams allows", len(s.streams))
	}
	if s.lastID == ^uint32(0) {
		s.mu.Unlock()
		return errors.New("tunnel: stream ids exhausted: start a new session")
	}
	s.lastID++
	st := s.newStream(s.lastID, MinWindow)
	s.streams[st.id] = st
	s.mu.Unlock()
	s.opened.Add(1)
	if err := s.c.Send(s.ctx, st.id, appendOpen(nil, uint32(s.cfg.Window))); err != nil {
		s.mu.Lock()
		delete(s.streams, st.id)
		s.mu.Unlock()
		s.fail(fmt.Errorf("tunnel: sending OPEN: %w", err))
		return err
	}
	st.attach(nc)
	return nil
}

// dispatch reads every message of the connection and hands it to its
// stream. It never blocks on a stream: data is queued within the window
// the stream granted.
func (s *Session) dispatch() {
	defer s.wg.Done()
	for {
		m, err := s.c.Recv(s.ctx)
		if err != nil {
			if s.ctx.Err() == nil {
				s.fail(err)
			}
			return
		}
		if err := s.handle(m); err != nil {
			s.c.Release(m.Data)
			s.fail(err)
			return
		}
	}
}

// handle processes one message; an error ends the session.
func (s *Session) handle(m multirail.Message) error {
	f, err := Decode(m.Tag, m.Data)
	if err != nil {
		return err
	}
	if f.Kind == KindOpen {
		defer s.c.Release(m.Data)
		return s.accept(f)
	}
	s.mu.Lock()
	st := s.streams[f.Stream]
	// A stream's frames follow its OPEN under the same tag, so a frame
	// for an id at most lastID that is not open is for a stream that
	// ended here.
	known := f.Stream <= s.lastID
	s.mu.Unlock()
	if st == nil {
		s.c.Release(m.Data)
		if !known {
			return fmt.Errorf("%w: kind %d for stream %d, never opened", ErrProtocol, f.Kind, f.Stream)
		}
		return nil // a stream that ended here; the peer had not heard yet
	}
	switch f.Kind {
	case KindData:
		s.received.Add(uint64(len(f.Data)))
		return st.deliver(m.Data)
	case KindFin:
		s.c.Release(m.Data)
		return st.peerFin()
	case KindReset:
		s.c.Release(m.Data)
		s.log.Debug("stream reset by peer", "stream", f.Stream, "reason", f.Reason)
		st.end(true, "")
	case KindWindow:
		s.c.Release(m.Data)
		return st.grant(int64(f.Window))
	}
	return nil
}

// accept handles an OPEN.
func (s *Session) accept(f Frame) error {
	if s.cfg.Dial == nil {
		return fmt.Errorf("%w: OPEN of stream %d sent to the opening end", ErrProtocol, f.Stream)
	}
	// OPENs travel under their streams' tags, which the transport does
	// not order among themselves: stream 2's may come before stream 1's.
	s.mu.Lock()
	if s.streams[f.Stream] != nil {
		s.mu.Unlock()
		return fmt.Errorf("%w: OPEN of stream %d, which is open", ErrProtocol, f.Stream)
	}
	s.lastID = max(s.lastID, f.Stream)
	if len(s.streams) >= s.cfg.MaxStreams {
		s.mu.Unlock()
		s.log.Warn("stream refused: too many streams", "stream", f.Stream, "max", s.cfg.MaxStreams)
		s.resets.Add(1)
		s.sendAsync(f.Stream, appendReset(nil, "too many streams"))
		return nil
	}
	st := s.newStream(f.Stream, int64(f.Window))
	s.streams[st.id] = st
	s.mu.Unlock()
	s.opened.Add(1)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		// The opener may send MinWindow before this grant arrives; this
		// end buffers up to Window from the start (while it dials, too).
		if inc := s.cfg.Window - MinWindow; inc > 0 {
			if s.send(0, appendWindow(nil, st.id, uint32(inc))) != nil {
				return
			}
		}
		ctx, cancel := context.WithTimeout(s.ctx, s.cfg.DialTimeout)
		nc, err := s.cfg.Dial(ctx)
		cancel()
		if err != nil {
			s.log.Warn("stream refused: dialing the target failed", "stream", st.id, "err", err)
			st.end(true, "dial target: "+err.Error())
			return
		}
		st.attach(nc)
	}()
	return nil
}

// sendAsync sends m on tag without blocking the caller (the dispatcher).
func (s *Session) sendAsync(tag uint32, m []byte) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.c.Send(s.ctx, tag, m); err != nil && s.ctx.Err() == nil {
			s.fail(fmt.Errorf("tunnel: send: %w", err))
		}
	}()
}

// send sends m on tag; an error ends the session.
func (s *Session) send(tag uint32, m []byte) error {
	if err := s.c.Send(s.ctx, tag, m); err != nil {
		if s.ctx.Err() == nil {
			s.fail(fmt.Errorf("tunnel: send: %w", err))
		}
		return err
	}
	return nil
}
