package rdzv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	hs "github.com/multirail/multirail/internal/handshake"
	tokens "github.com/multirail/multirail/internal/token"
)

// Defaults of ServerConfig.
const (
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultMaxPending       = 64
	// statusInterval coalesces status frames: at most one per registered
	// connection per interval, and only when the registrations changed.
	statusInterval = 250 * time.Millisecond
	// maxRefusals is how many refusals an IncompleteError keeps.
	maxRefusals = 8
)

// ErrServerClosed is the cause in the IncompleteError Serve returns after
// Close.
var ErrServerClosed = errors.New("rdzv: server closed")

// ServerConfig configures a Server.
type ServerConfig struct {
	// Size is the number of ranks of the job, 1..MaxSize.
	Size int
	// JobID, when set, must equal every card's job id. When empty, the
	// cards must agree among themselves.
	JobID string
	// Token is the shared secret; empty means the MULTIRAIL_TOKEN
	// environment variable (TokenEnv), and when that is empty too, no
	// secret (trusted networks only).
	Token string
	// Logger receives a warning per refused connection and debug lines;
	// nil discards.
	Logger *slog.Logger
	// MaxCard is the largest card in bytes (default DefaultMaxCard, at
	// most MaxCardLimit).
	MaxCard int
	// HandshakeTimeout bounds each connection's handshake (hello to card)
	// and each later write (default DefaultHandshakeTimeout).
	HandshakeTimeout time.Duration
	// MaxPending bounds the connections in their handshake at once
	// (default DefaultMaxPending); further connections wait in the
	// listen backlog. Registered connections count apart (at most Size).
	MaxPending int
}

// Server serves one job's tcp:// rendezvous on a listener. Ranks connect,
// authenticate and register their card; when every rank is registered
// the server answers every connection with the table of all cards, and
// Serve returns once every rank has confirmed it.
type Server struct {
	ln    net.Listener
	cfg   ServerConfig
	token []byte
	log   *slog.Logger
	addr  string

	quit      chan struct{} // closed when Serve stops
	closeCh   chan struct{} // closed by Close
	closeOnce sync.Once
	complete  chan struct{} // closed when the table is complete
	allDone   chan struct{} // closed when every rank acknowledged the table
	sem       chan struct{} // handshake slots
	wg        sync.WaitGroup

	mu          sync.Mutex
	serving     bool
	members     []*member // before completion: the registered ranks
	registered  int
	seen        []bool   // ranks that registered at some time
	jobID       string   // cfg.JobID, or the registered cards' job id
	table       [][]byte // set when complete
	tableBody   []byte   // encoded table
	acked       []bool
	nacked      int
	gen         chan struct{} // closed and replaced when registrations change
	changed     bool
	conns       map[*sconn]struct{}
	connGone    chan struct{} // closed and replaced when a connection ends
	connections int
	refusals    []string
}

type member struct {
	data []byte
	job  string
	conn *sconn
}

// sconn is one accepted connection.
type sconn struct {
	c        net.Conn
	addr     string
	kick     chan struct{}
	kickOnce sync.Once
	// The ciphers of the two directions, once the handshake is done:
	// every frame is sealed from then on. Used by the connection's
	// goroutine (send), and its handshake, then its reader (recv).
	send, recv *hs.Cipher
}

// kickOut ends the connection: its handshake or wait fails at once.
func (c *sconn) kickOut() {
	c.kickOnce.Do(func() {
		close(c.kick)
		c.c.Close()
	})
}

// validate fills the defaults of c in (MaxCard, HandshakeTimeout,
// MaxPending, Logger, and Token from TokenEnv) and checks it; the error
// names the field, its value and what is allowed. Size is required.
func (c *ServerConfig) validate() error {
	if c.Size < 1 || c.Size > MaxSize {
		return fmt.Errorf("rdzv: ServerConfig.Size %d is out of range: allowed 1..%d", c.Size, MaxSize)
	}
	if len(c.JobID) > MaxJobID {
		return fmt.Errorf("rdzv: ServerConfig.JobID of %d bytes is too long: allowed at most %d", len(c.JobID), MaxJobID)
	}
	if c.MaxCard == 0 {
		c.MaxCard = DefaultMaxCard
	}
	if c.MaxCard < 0 || c.MaxCard > MaxCardLimit {
		return fmt.Errorf("rdzv: ServerConfig.MaxCard %d is out of range: allowed 1..%d bytes (0 = %d)", c.MaxCard, MaxCardLimit, DefaultMaxCard)
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.HandshakeTimeout < 0 {
		return fmt.Errorf("rdzv: ServerConfig.HandshakeTimeout %v is negative: allowed > 0 (0 = %v)", c.HandshakeTimeout, DefaultHandshakeTimeout)
	}
	if c.MaxPending == 0 {
		c.MaxPending = DefaultMaxPending
	}
	if c.MaxPending < 0 || c.MaxPending > 65536 {
		return fmt.Errorf("rdzv: ServerConfig.MaxPending %d is out of range: allowed 1..65536 (0 = %d)", c.MaxPending, DefaultMaxPending)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	tok, err := tokens.Resolve(c.Token)
	if err != nil {
		return fmt.Errorf("rdzv: ServerConfig.Token: %w", err)
	}
	c.Token = tok
	return nil
}

// NewServer checks cfg and returns a server for ln. Serve runs it; the
// server owns ln from then on and closes it when Serve returns.
func NewServer(ln net.Listener, cfg ServerConfig) (*Server, error) {
	if ln == nil {
		return nil, errors.New("rdzv: NewServer: nil listener")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Server{
		ln:       ln,
		cfg:      cfg,
		token:    []byte(cfg.Token),
		log:      cfg.Logger,
		addr:     "tcp://" + ln.Addr().String(),
		quit:     make(chan struct{}),
		closeCh:  make(chan struct{}),
		complete: make(chan struct{}),
		allDone:  make(chan struct{}),
		sem:      make(chan struct{}, cfg.MaxPending),
		members:  make([]*member, cfg.Size),
		acked:    make([]bool, cfg.Size),
		seen:     make([]bool, cfg.Size),
		jobID:    cfg.JobID,
		connGone: make(chan struct{}),
		gen:      make(chan struct{}),
		conns:    make(map[*sconn]struct{}),
	}, nil
}

// IncompleteError is returned by Serve when it stops (ctx done, Close, or
// the listener failed) before every rank confirmed the table.
type IncompleteError struct {
	JobID string
	Size  int
	// Complete reports whether every rank had registered (the table was
	// sent); Missing then lists the ranks that did not confirm it.
	// Otherwise Missing lists the ranks that never registered, and Left
	// those that registered but whose connection broke, and did not come
	// back, before the table was complete.
	Complete bool
	Missing  []int
	Left     []int
	// Connections counts the connections accepted; 0 means no rank ever
	// came (a program that does not use the rendezvous).
	Connections int
	// Refusals are the last connections refused (wrong token, size...),
	// as told to the ranks.
	Refusals []string
	// Err is why the server stopped: ctx's error, ErrServerClosed, or the
	// listener's error.
	Err error
}

func (e *IncompleteError) Error() string {
	var b bytes.Buffer
	// Not yet "rdzv: rendezvous": cmd/multirail's TestRunRendezvousIncomplete
	// matches the text after "every rank has exited: ".
	b.WriteString("rendezvous")
	if e.JobID != "" {
		fmt.Fprintf(&b, " of job %q", e.JobID)
	}
	miss := formatRanges(rangesOf(e.Missing), len(e.Missing))
	switch {
	case e.Complete:
		fmt.Fprintf(&b, ": rank(s) %s of %d did not confirm the table", miss, e.Size)
	case len(e.Missing) > 0:
		fmt.Fprintf(&b, ": rank(s) %s of %d never registered", miss, e.Size)
		if len(e.Left) > 0 {
			fmt.Fprintf(&b, ", rank(s) %s registered but left", formatRanges(rangesOf(e.Left), len(e.Left)))
		}
	default:
		fmt.Fprintf(&b, ": rank(s) %s of %d registered but left before the table was complete", formatRanges(rangesOf(e.Left), len(e.Left)), e.Size)
	}
	if n := len(e.Refusals); n > 0 {
		fmt.Fprintf(&b, "; %d refused, last: %s", n, e.Refusals[n-1])
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

func (e *IncompleteError) Unwrap() error { return e.Err }

// Missing returns the ranks the server still waits for: before the table
// is complete the ranks not registered, after it the ranks that have not
// confirmed it.
func (s *Server) Missing() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.missingLocked()
}

func (s *Server) missingLocked() []int {
	var out []int
	for r := range s.cfg.Size {
		if s.table == nil && s.members[r] == nil || s.table != nil && !s.acked[r] {
			out = append(out, r)
		}
	}
	return out
}

// Close stops Serve (or makes a later Serve return at once) and closes
// the listener. It is safe to call more than once and concurrently.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { close(s.closeCh) })
	s.mu.Lock()
	serving := s.serving
	s.mu.Unlock()
	if !serving {
		return s.ln.Close()
	}
	return nil
}

// Drain is Close for a launcher whose ranks have all exited: first it lets
// the connections it has read what their ranks sent before exiting (a
// confirmation written just before the process ended is still in the
// socket), until every connection has ended or d has passed, then it
// closes. A rank that exits right after confirming the table is thus
// counted as having confirmed it.
func (s *Server) Drain(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		s.mu.Lock()
		n, gone := len(s.conns), s.connGone
		s.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-gone:
			continue
		case <-s.allDone:
		case <-s.quit:
		case <-t.C:
		}
		break
	}
	return s.Close()
}

// Serve runs the rendezvous until every rank has confirmed the table
// (nil), ctx is done, or Close is called (an *IncompleteError naming the
// missing ranks). It closes the listener and every connection before it
// returns. Serve may be called once.
func (s *Server) Serve(ctx context.Context) error {
	s.mu.Lock()
	if s.serving {
		s.mu.Unlock()
		return errors.New("rdzv: Serve called twice")
	}
	s.serving = true
	s.mu.Unlock()

	acceptErr := make(chan error, 1)
	s.wg.Add(2)
	go s.acceptLoop(acceptErr)
	go s.ticker()

	var cause error
	select {
	case <-s.allDone:
	case <-ctx.Done():
		cause = ctx.Err()
	case <-s.closeCh:
		cause = ErrServerClosed
	case err := <-acceptErr:
		cause = fmt.Errorf("rdzv: accept on %s: %w", s.addr, err)
		select {
		case <-s.closeCh: // Close closed the listener
			cause = ErrServerClosed
		default:
		}
	}
	close(s.quit)
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.kickOut()
	}
	s.mu.Unlock()
	s.wg.Wait()
	if cause == nil {
		s.log.Debug("rdzv: complete", "job", s.jobID, "size", s.cfg.Size)
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := &IncompleteError{
		JobID: s.jobID, Size: s.cfg.Size, Complete: s.table != nil,
		Connections: s.connections, Refusals: slices.Clone(s.refusals), Err: cause,
	}
	for _, r := range s.missingLocked() {
		if !e.Complete && s.seen[r] {
			e.Left = append(e.Left, r)
		} else {
			e.Missing = append(e.Missing, r)
		}
	}
	return e
}

func (s *Server) acceptLoop(errc chan<- error) {
	defer s.wg.Done()
	delay := 5 * time.Millisecond
	for {
		select {
		case s.sem <- struct{}{}:
		case <-s.quit:
			return
		}
		c, err := s.ln.Accept()
		if err != nil {
			<-s.sem
			select {
			case <-s.quit:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				// EMFILE and the like: wait and try again, as net/http does.
				t := time.NewTimer(delay)
				select {
				case <-t.C:
				case <-s.quit:
					t.Stop()
					return
				}
				delay = min(2*delay, time.Second)
				continue
			}
			errc <- err
			return
		}
		delay = 5 * time.Millisecond
		sc := &sconn{c: c, addr: c.RemoteAddr().String(), kick: make(chan struct{})}
		s.mu.Lock()
		select {
		case <-s.quit:
			// Serve has already kicked the connections out.
			s.mu.Unlock()
			c.Close()
			<-s.sem
			return
		default:
		}
		s.conns[sc] = struct{}{}
		s.connections++
		s.mu.Unlock()
		s.wg.Add(1)
		go s.handle(sc)
	}
}

func isTemporary(err error) bool {
	t, ok := err.(interface{ Temporary() bool })
	return ok && t.Temporary()
}

// ticker wakes the registered connections to send a status frame, at most
// once per statusInterval, when the registrations changed.
func (s *Server) ticker() {
	defer s.wg.Done()
	t := time.NewTicker(statusInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.mu.Lock()
			if s.changed {
				s.changed = false
				close(s.gen)
				s.gen = make(chan struct{})
			}
			s.mu.Unlock()
		case <-s.quit:
			return
		}
	}
}

// refuse tells the rank why (one line: in clear before the handshake is
// done, sealed after), logs it, and keeps it for the IncompleteError.
func (s *Server) refuse(sc *sconn, code byte, msg string) {
	s.log.Warn("rdzv: refused a rank", "from", sc.addr, "reason", msg)
	s.mu.Lock()
	if len(s.refusals) == maxRefusals {
		s.refusals = slices.Delete(s.refusals, 0, 1)
	}
	s.refusals = append(s.refusals, msg)
	s.mu.Unlock()
	sc.c.SetWriteDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	if len(msg) > maxErrorText {
		msg = msg[:maxErrorText]
	}
	body := append([]byte{code}, msg...)
	if sc.send != nil {
		writeSealed(sc.c, sc.send, tError, body)
		return
	}
	writeFrame(sc.c, tError, body)
}

func (s *Server) handle(sc *sconn) {
	defer s.wg.Done()
	defer func() {
		sc.c.Close()
		s.mu.Lock()
		delete(s.conns, sc)
		close(s.connGone)
		s.connGone = make(chan struct{})
		s.mu.Unlock()
	}()
	// The handshake holds a slot; kickOut ends it early.
	card, ok := s.handshake(sc)
	<-s.sem
	if ok {
		s.serveMember(sc, card)
	}
}

// handshake authenticates the rank and reads its card, within
// HandshakeTimeout: hello, the rank's noise1 (which proves that it knows
// the token: nothing that depends on the token goes to a rank that did
// not prove it), noise2, then the card, sealed. Refusals are sent to the
// rank.
func (s *Server) handshake(sc *sconn) (Card, bool) {
	c := sc.c
	c.SetDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	hello := helloBody()
	if err := writeFrame(c, tHello, hello); err != nil {
		s.log.Debug("rdzv: hello", "from", sc.addr, "err", err)
		return Card{}, false
	}
	typ, body, err := readFrame(c, noise1Len)
	if err != nil {
		s.log.Debug("rdzv: reading noise1", "from", sc.addr, "err", err)
		if errors.Is(err, errFrame) {
			s.refuse(sc, codeProtocol, fmt.Sprintf("protocol error from %s: %v", sc.addr, err))
		}
		return Card{}, false
	}
	if typ != tNoise1 || len(body) < 1 {
		s.refuse(sc, codeProtocol, fmt.Sprintf("protocol error from %s: frame type %d of %d bytes, want noise1 (type %d, %d bytes)", sc.addr, typ, len(body), tNoise1, noise1Len-1))
		return Card{}, false
	}
	if body[0] != version {
		s.refuse(sc, codeProtocol, fmt.Sprintf("rank at %s speaks rendezvous protocol version %d, this server version %d", sc.addr, body[0], version))
		return Card{}, false
	}
	if len(body) != noise1Len-1 {
		s.refuse(sc, codeProtocol, fmt.Sprintf("protocol error from %s: noise1 of %d bytes, want %d", sc.addr, len(body), noise1Len-1))
		return Card{}, false
	}
	st, err := newState(false, hello, s.token)
	if err != nil {
		s.log.Warn("rdzv: handshake state", "from", sc.addr, "err", err)
		return Card{}, false
	}
	if _, _, _, err := st.ReadMessage(nil, body[1:]); err != nil {
		s.refuse(sc, codeAuth, fmt.Sprintf("authentication failed: the rank at %s does not have the server's token (%s)", sc.addr, TokenEnv))
		return Card{}, false
	}
	msg2, cs1, cs2, err := st.WriteMessage(nil, nil)
	if err != nil || cs1 == nil || cs2 == nil {
		s.log.Warn("rdzv: handshake", "from", sc.addr, "err", err)
		return Card{}, false
	}
	if err := writeFrame(c, tNoise2, msg2); err != nil {
		return Card{}, false
	}
	// The initiator (the rank) sends with the first cipher of the split.
	sc.recv, sc.send = hs.NewCipher(cs1), hs.NewCipher(cs2)
	typ, body, err = readSealed(c, sc.recv, cardFrameMax(s.cfg.MaxCard))
	switch {
	case errors.Is(err, hs.ErrAuth):
		s.refuse(sc, codeAuth, s.notOpen(sc, "card", err))
		return Card{}, false
	case errors.Is(err, errAfterHandshake):
		s.refuse(sc, codeProtocol, fmt.Sprintf("protocol error from %s: %v", sc.addr, err))
		return Card{}, false
	case err != nil:
		s.log.Debug("rdzv: reading card", "from", sc.addr, "err", err)
		if errors.Is(err, errFrame) {
			s.refuse(sc, codeRefused, fmt.Sprintf("card from %s refused: %v (the server's MaxCard is %d bytes)", sc.addr, err, s.cfg.MaxCard))
		}
		return Card{}, false
	case typ != tCard:
		s.refuse(sc, codeProtocol, fmt.Sprintf("protocol error from %s: frame type %d, want card (type %d)", sc.addr, typ, tCard))
		return Card{}, false
	}
	card, err := decodeCardBody(body, s.cfg.MaxCard)
	if err != nil {
		s.refuse(sc, codeRefused, fmt.Sprintf("card from %s refused: %v (the server's MaxCard is %d bytes)", sc.addr, err, s.cfg.MaxCard))
		return Card{}, false
	}
	c.SetDeadline(time.Time{})
	return card, true
}

// notOpen is the refusal for a sealed frame from the rank that does not
// open (err wraps handshake.ErrAuth).
func (s *Server) notOpen(sc *sconn, what string, err error) string {
	return fmt.Sprintf("authentication failed: the %s from %s does not open: altered on the way, or not sent by the rank that authenticated (%v)", what, sc.addr, err)
}

// register records sc's card. It returns a refusal, or whether the table
// is already complete (a rank retrying after the table was sent).
func (s *Server) register(sc *sconn, card Card) (refusal string, done bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if card.Size != s.cfg.Size {
		return fmt.Sprintf("rank %d says size %d, the server's job has size %d", card.Rank, card.Size, s.cfg.Size), false
	}
	if card.Rank < 0 || card.Rank >= s.cfg.Size {
		return fmt.Sprintf("rank %d is out of range: the server's job has size %d (ranks 0..%d)", card.Rank, s.cfg.Size, s.cfg.Size-1), false
	}
	if s.jobID != "" || s.registered > 0 || s.table != nil {
		if card.JobID != s.jobID {
			return fmt.Sprintf("rank %d says job id %q, the server's job id is %q", card.Rank, card.JobID, s.jobID), false
		}
	}
	r := card.Rank
	if s.table != nil {
		if !bytes.Equal(s.table[r], card.Data) {
			return fmt.Sprintf("rank %d is registered twice with different data (the job's table is complete; a second process with rank %d?)", r, r), false
		}
		return "", true
	}
	if m := s.members[r]; m != nil {
		if !bytes.Equal(m.data, card.Data) {
			return fmt.Sprintf("rank %d is already registered from %s with different data (a second process with rank %d?)", r, m.conn.addr, r), false
		}
		// Same card: a retry. The new connection replaces the old one.
		m.conn.kickOut()
		m.conn = sc
		s.log.Debug("rdzv: rank re-registered", "rank", r, "from", sc.addr)
		return "", false
	}
	s.members[r] = &member{data: bytes.Clone(card.Data), job: card.JobID, conn: sc}
	s.registered++
	s.seen[r] = true
	s.jobID = card.JobID
	s.changed = true
	s.log.Debug("rdzv: rank registered", "rank", r, "from", sc.addr, "registered", s.registered, "size", s.cfg.Size)
	if s.registered == s.cfg.Size {
		s.table = make([][]byte, s.cfg.Size)
		for i, m := range s.members {
			s.table[i] = m.data
		}
		s.tableBody = encodeTable(s.table)
		s.members = nil
		close(s.complete)
	}
	return "", false
}

// drop forgets rank r when sc still holds its registration (the table
// not yet complete): the rank must register again.
func (s *Server) drop(sc *sconn, r int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.table == nil && s.members[r] != nil && s.members[r].conn == sc {
		s.members[r] = nil
		s.registered--
		s.changed = true
		if s.registered == 0 && s.cfg.JobID == "" {
			s.jobID = ""
		}
		s.log.Debug("rdzv: rank's connection broke before the table", "rank", r, "from", sc.addr)
	}
}

func (s *Server) ack(r int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.acked[r] {
		s.acked[r] = true
		s.nacked++
		if s.nacked == s.cfg.Size {
			close(s.allDone)
		}
	}
}

func (s *Server) statusLocked() status {
	st := status{registered: s.registered, size: s.cfg.Size}
	miss := s.missingLocked()
	st.missing = len(miss)
	st.ranges = rangesOf(miss)
	if len(st.ranges) > maxStatusRanges {
		st.ranges = st.ranges[:maxStatusRanges]
	}
	return st
}

// serveMember serves a registered connection: status frames until the
// table is complete, the table, then the rank's acknowledgement.
func (s *Server) serveMember(sc *sconn, card Card) {
	c := sc.c
	write := func(typ byte, body []byte) error {
		c.SetWriteDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
		return writeSealed(c, sc.send, typ, body)
	}
	refusal, done := s.register(sc, card)
	if refusal != "" {
		s.refuse(sc, codeRefused, refusal)
		return
	}
	// The reader sees the acknowledgement, or the connection break.
	readc := make(chan error, 1)
	go func() {
		typ, body, err := readSealed(c, sc.recv, 1)
		if err == nil && (typ != tAck || len(body) != 0) {
			err = fmt.Errorf("%w: frame type %d, want ack", errFrame, typ)
		}
		readc <- err
	}()
	defer func() {
		c.Close()
		<-readc
	}()
	s.mu.Lock()
	gen := s.gen
	st := s.statusLocked()
	s.mu.Unlock()
	complete := s.complete
	if done {
		complete = closedChan
	} else if err := write(tStatus, st.encode()); err != nil {
		s.drop(sc, card.Rank)
		return
	}
	sent := false
	for {
		select {
		case <-complete:
			complete = nil
			s.mu.Lock()
			body := s.tableBody
			s.mu.Unlock()
			if err := write(tTable, body); err != nil {
				s.log.Debug("rdzv: writing the table", "rank", card.Rank, "err", err)
				return
			}
			sent = true
			// The rank answers at once; a rank that does not is cut off
			// and retries.
			c.SetReadDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
		case <-gen:
			s.mu.Lock()
			gen = s.gen
			st := s.statusLocked()
			full := s.table != nil
			s.mu.Unlock()
			if !full {
				if err := write(tStatus, st.encode()); err != nil {
					s.drop(sc, card.Rank)
					return
				}
			}
		case err := <-readc:
			readc <- err // for the deferred receive
			if err == nil && sent {
				s.ack(card.Rank)
				return
			}
			if err == nil {
				err = errors.New("acknowledgement before the table")
			}
			if errors.Is(err, hs.ErrAuth) {
				s.refuse(sc, codeAuth, s.notOpen(sc, "frame", err))
			} else {
				s.log.Debug("rdzv: rank's connection ended", "rank", card.Rank, "from", sc.addr, "err", err)
			}
			s.drop(sc, card.Rank)
			return
		case <-sc.kick:
			return
		}
	}
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

var _ io.Closer = (*Server)(nil)
