package multirail

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/multirail/multirail/internal/reasm"
	"github.com/multirail/multirail/internal/token"
	"github.com/multirail/multirail/internal/wire"
	"github.com/multirail/multirail/sched"
)

// Defaults for the zero values of Config.
const (
	DefaultScheduler         = "qlearn"
	DefaultSegmentSize       = 16 << 10
	DefaultFrameSize         = 64 << 10
	DefaultMaxPeerSegment    = 4 << 20
	DefaultQueueDepth        = 16
	DefaultMaxMessageSize    = 64 << 20
	DefaultMaxListenerBuffer = 16 << 30
	DefaultHandshakeTimeout  = 10 * time.Second
	DefaultIdleTimeout       = 30 * time.Second
	DefaultSessionGrace      = 15 * time.Second
	DefaultMaxHandshakes     = 128
	DefaultMaxSessions       = 128
	DefaultEagerLimit        = 16 << 10
	DefaultRailTimeout       = 500 * time.Millisecond
	// AckDelay is how long a receiver may hold the acknowledgement of an
	// eager message, waiting to piggyback it on a frame of its own.
	AckDelay = time.Millisecond
	// MaxBusyPoll bounds Config.BusyPoll.
	MaxBusyPoll = 10 * time.Millisecond
	// MaxRails is the largest number of rails in one connection.
	MaxRails = 64
	// MinDispatchInterval and MaxDispatchInterval bound a non-zero
	// Config.DispatchInterval (the patent's timer range).
	MinDispatchInterval = 10 * time.Millisecond
	MaxDispatchInterval = time.Second
)

// InsecureEnv set to "1" (or "true") has the effect of Config.Insecure in
// every Config of the process and of the processes it starts (the command
// line's --insecure sets it).
const InsecureEnv = "MULTIRAIL_INSECURE"

// MinTokenLength is the shortest token accepted unless Config.Insecure.
const MinTokenLength = token.MinLength

// PlaintextEnv set to "1" (or "true") has the effect of Config.Plaintext
// in every Config of the process and of the processes it starts (the
// command line's --plaintext sets it); "0", "false" or unset leave
// Config.Plaintext alone.
const PlaintextEnv = "MULTIRAIL_PLAINTEXT"

// TokenEnv is the environment variable read when Config.Token is empty;
// TokenFileEnv names a file read when that is empty too.
const (
	TokenEnv     = token.Env
	TokenFileEnv = token.FileEnv
)

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("multirail: invalid config")

// Rail is one path to the peer, as seen by the dialing side.
type Rail struct {
	// Name labels the rail in Stats and logs; empty means Addr.
	Name string
	// Addr is the peer's host:port to dial for this rail.
	Addr string
	// Local is the local IP address to dial from (binds the rail to a
	// NIC); empty lets the kernel choose.
	Local string
	// Bandwidth is the rail's nominal rate in bits per second, 0 if
	// unknown. Only the "weighted" scheduler needs it.
	Bandwidth float64
}

// Config configures Dial and Listen. The zero value (plus Rails for Dial) is
// a working configuration; every field's zero value means its default.
type Config struct {
	// Rails are the paths to the peer (Dial only; Listen ignores it).
	// 1..MaxRails entries.
	Rails []Rail
	// Scheduler names the segment scheduler (see sched.Names); empty means
	// DefaultScheduler.
	Scheduler string
	// SchedulerOptions are the scheduler's constants as "key=value,..."
	// (for qlearn and qlearn-patent: k, beta, gamma, ... as in
	// qlearn.ParseOptions and docs/scheduler.md); empty means the
	// scheduler's defaults. The baselines take none.
	SchedulerOptions string
	// SegmentSize is the unit of a message's offsets on the wire and of
	// the receiver's reassembly, in bytes, 512..64 MiB; 0 means 16 KiB. A
	// message is cut at multiples of it: the planner's shares are whole
	// segments (Config.PlanMin), so a smaller segment lets unequal rails
	// end closer together.
	SegmentSize int
	// FrameSize is the largest frame of a large message on a rail slower
	// than about 1 Gbit/s (faster rails take frames of several: spans),
	// in bytes, a multiple of SegmentSize up to 1 MiB; it is the unit the
	// scheduler places and the send queues count (QueueDepth). 0 means
	// 64 KiB when SegmentSize is 0 too, otherwise SegmentSize.
	FrameSize int
	// MaxPeerSegmentSize is the largest segment size accepted from the
	// peer: a receiver holds up to a segment per rail outside the
	// flow-control window (a copy of a segment that arrives on two rails
	// at once), so a peer's choice must be bounded. A peer announcing a
	// larger one is refused at the handshake. 0 means the larger of 4 MiB
	// and SegmentSize; allowed SegmentSize..64 MiB.
	MaxPeerSegmentSize int
	// QueueDepth is each rail's send-queue capacity in segments
	// (queue_max), 1..65536; 0 means 16.
	QueueDepth int
	// Token is the shared secret both sides prove they know: the
	// pre-shared key of a Noise handshake (Noise_NNpsk0, see
	// docs/wire.md) that opens a session and derives its keys. Empty
	// means the value of the MULTIRAIL_TOKEN environment variable, or when
	// that is empty the contents of the file MULTIRAIL_TOKEN_FILE names
	// (refused when anyone but its owner may read it). It must have at
	// least MinTokenLength (32) characters unless Insecure. `multirail
	// token` and NewToken make a new random one.
	Token string
	// MaxMessageSize is the largest message accepted, in bytes; 0 means
	// 64 MiB. Sends of larger messages fail; a peer announcing one loses
	// the connection. The receive window (MaxReceiveBuffer) is at least
	// this, for every peer: 64 MiB keeps a listener with a hundred peers
	// at 12.5 GiB of windows (1 GiB, the default until wire version 4,
	// made that 106 GiB); set it on both sides for larger messages.
	MaxMessageSize int64
	// MaxReceiveBuffer bounds the bytes held for the peer: the buffers of
	// messages being reassembled plus complete messages not yet taken by
	// Recv, each counted at its capacity (the message's size below 2 KiB,
	// else its size class, less than 12.5 % more) plus 256 bytes. It is
	// the flow-control window the peer may not exceed. 0 means
	// MaxMessageSize + 64 MiB (at least what one MaxMessageSize message
	// costs); it must be at least that cost.
	MaxReceiveBuffer int64
	// HandshakeTimeout bounds every rail's handshake and, on the accepting
	// side, the time for all rails of a session to join; 0 means 10 s.
	HandshakeTimeout time.Duration
	// IdleTimeout drops a rail on which nothing arrived for this long;
	// idle rails send a ping every IdleTimeout/3. A frame that takes
	// longer to arrive is not cut while at least 64 KiB of it arrive per
	// IdleTimeout. 0 means 30 s.
	IdleTimeout time.Duration
	// RailTimeout takes a rail out of service when segments sent on it
	// have waited this long, plus four times the rail's recent
	// acknowledgement delay, without any acknowledgement (a link that went
	// down loses packets silently; TCP would retry for minutes), while
	// another rail still works. Its segments are then sent on the other
	// rails, and the dialing side reconnects the rail in the background
	// (see docs/wire.md, "Rail rejoin"). 0 means 500 ms (at most
	// IdleTimeout); allowed 10 ms to IdleTimeout.
	RailTimeout time.Duration
	// SessionGrace is how long a session of two or more rails whose
	// every rail is down waits for one to come back (the dialing side keeps
	// reconnecting, the accepting side keeps the session for its rejoins)
	// before its calls fail with ErrAllRailsDown; meanwhile Send queues
	// (within the peer's credit) and Recv waits. A session does not wait
	// when its last rail was closed or reset by the peer's end (EOF,
	// ECONNRESET: the peer's process ended), nor once the peer refuses
	// every rejoin (it no longer has the session). 0 means 15 s; a
	// negative value fails at once.
	SessionGrace time.Duration
	// DialRail, when set, opens rail r's TCP connection in place of a
	// net.Dialer bound to r.Local: for instance to dial from another network
	// namespace, or through a proxy. It must honour ctx's deadline and
	// cancellation. Dial only.
	DialRail func(ctx context.Context, r Rail) (net.Conn, error)
	// EagerLimit is the size up to which Send copies a message and returns
	// once it is handed to a rail, without waiting for the peer's
	// acknowledgement (MPI's eager protocol); larger messages are sent from
	// the caller's buffer and Send waits. 0 means 16 KiB (at most
	// SegmentSize); a negative value turns eager sends off.
	EagerLimit int
	// PlanMin is the smallest message the transport plans when the
	// scheduler leaves large messages to it (sched.Planning; qlearn does):
	// the message is split over the rails that are up, each a contiguous
	// share sized from the rail's measured rate and backlog so that all
	// are expected to finish together, and the tail moves to a rail that
	// runs dry (docs/scheduler.md, "The planner"). Smaller messages are
	// placed frame by frame by the scheduler. 0 means 2 x FrameSize;
	// a negative value turns planning off.
	PlanMin int
	// Checksum adds a CRC32C of every segment's payload, checked by the
	// receiver (TCP's own checksum is weak; costs CPU). Small messages then
	// go as DATA frames too: a SMALL frame has no CRC field (docs/wire.md).
	Checksum bool
	// Plaintext sends frames in clear after the handshake, for fabrics the
	// job trusts: faster, but an on-path attacker can then read the data,
	// alter it, forge acknowledgements and end sessions (README,
	// "Security"). The handshake is authenticated either way. Frames are
	// in clear only when both sides set it; otherwise every frame is
	// sealed (AES-256-GCM under per-rail keys from the handshake).
	// MULTIRAIL_PLAINTEXT=1 in the environment sets it too (PlaintextEnv).
	Plaintext bool
	// Insecure accepts a token shorter than MinTokenLength (32)
	// characters, or none at all (a key everyone knows), for tests and
	// trusted networks; a warning is logged once per process. Without it
	// such a token is a configuration error. MULTIRAIL_INSECURE=1 sets it
	// too (InsecureEnv).
	Insecure bool
	// Seed seeds the scheduler's random source.
	Seed uint64
	// MaxHandshakes bounds the handshakes a Listener runs at once; more
	// connections are closed at once. 0 means 128.
	MaxHandshakes int
	// MaxSessions bounds the sessions a Listener holds at once: open ones
	// (accepted, or waiting for Accept) and ones whose rails are still
	// joining. A new session beyond it is refused (REJECT busy) and
	// logged; rails rejoining an open session are not counted again. Each
	// session may hold up to MaxReceiveBuffer of the peer's messages, so
	// MaxSessions x MaxReceiveBuffer bounds them all (README). 0 means
	// 128.
	MaxSessions int
	// MaxListenerBuffer bounds the receive windows (MaxReceiveBuffer) of
	// all the sessions a Listener holds together: a new session that would
	// exceed it is refused (REJECT busy) and logged. With the defaults
	// (windows of 128 MiB) it admits MaxSessions (128) sessions; with
	// windows of 1 GiB, 15. 0 means 16 GiB; it must be at least
	// MaxReceiveBuffer. Listen only.
	MaxListenerBuffer int64
	// DispatchInterval selects how segments leave the rails' send queues.
	// 0 (the default) means continuously: each rail's writer takes
	// segments as soon as they are queued. A value in
	// MinDispatchInterval..MaxDispatchInterval (10ms..1s) means on a timer,
	// as in CN101833479A: every DispatchInterval, all segments queued at
	// that tick are released to the rails' writers, and no segment leaves
	// a queue between ticks (not even a small eager message, which
	// otherwise goes out from Send itself). Control frames
	// (acknowledgements, credit, pings, GOAWAY) are never delayed, and
	// Close releases everything still queued at once. It applies to this
	// side's sends only.
	DispatchInterval time.Duration
	// BusyPoll is how long a rail's reader keeps polling its socket, after
	// the connection last sent or received a frame, before it waits in the
	// kernel for the next one (MPI libraries' progress engines poll so):
	// an answer that comes within it is read without waking a sleeping
	// thread, which in a virtual machine costs tens of microseconds per
	// message. Polling spends the CPU it waits with (other goroutines run
	// between polls). 0, the default, never polls; allowed 0 to
	// MaxBusyPoll (10ms). It needs rails with a file descriptor on Linux
	// (TCP); other rails never poll.
	BusyPoll time.Duration
	// Logger receives the library's logs; nil discards them.
	Logger *slog.Logger
}

// config is a validated Config with defaults filled in.
type config struct {
	Config
	token []byte
}

func cfgErr(field string, value any, allowed string) error {
	return fmt.Errorf("%w: %s = %v, allowed %s", ErrConfig, field, value, allowed)
}

// Validate checks every field as Listen does (Rails are optional), so that
// a program can refuse bad settings before it opens anything. The error
// wraps ErrConfig and names the field, its value and what is allowed.
func (c Config) Validate() error {
	_, err := c.validate(false)
	return err
}

// validate fills defaults and checks every field. dialing says whether
// Rails is required.
func (c Config) validate(dialing bool) (config, error) {
	if c.Scheduler == "" {
		c.Scheduler = DefaultScheduler
	}
	known := false
	for _, n := range sched.Names() {
		known = known || n == c.Scheduler
	}
	if !known {
		return config{}, cfgErr("Scheduler", fmt.Sprintf("%q", c.Scheduler), strings.Join(sched.Names(), ", "))
	}
	if c.SchedulerOptions != "" {
		// Build one to check the options; rates only matter to weighted.
		n := max(len(c.Rails), 1)
		ones := make([]float64, n)
		for i := range ones {
			ones[i] = 1
		}
		if _, err := sched.New(c.Scheduler, sched.Config{Rails: n, Bandwidths: ones, Options: c.SchedulerOptions}); err != nil {
			return config{}, fmt.Errorf("%w: SchedulerOptions = %q: %v", ErrConfig, c.SchedulerOptions, err)
		}
	}
	if c.SegmentSize == 0 {
		c.SegmentSize = DefaultSegmentSize
		if c.FrameSize == 0 {
			c.FrameSize = DefaultFrameSize
		}
	}
	if c.SegmentSize < wire.MinSegmentSize || c.SegmentSize > wire.MaxSegmentSize {
		return config{}, cfgErr("SegmentSize", c.SegmentSize, fmt.Sprintf("%d..%d bytes", wire.MinSegmentSize, wire.MaxSegmentSize))
	}
	if c.FrameSize == 0 {
		c.FrameSize = c.SegmentSize
	}
	if c.FrameSize < c.SegmentSize || c.FrameSize%c.SegmentSize != 0 || c.FrameSize > wire.MaxPayload(c.SegmentSize) {
		return config{}, cfgErr("FrameSize", c.FrameSize, fmt.Sprintf("a multiple of SegmentSize (%d) up to %d bytes", c.SegmentSize, wire.MaxPayload(c.SegmentSize)))
	}
	if c.QueueDepth == 0 {
		c.QueueDepth = DefaultQueueDepth
	}
	if c.QueueDepth < 1 || c.QueueDepth > 65536 {
		return config{}, cfgErr("QueueDepth", c.QueueDepth, "1..65536 segments")
	}
	if c.EagerLimit == 0 {
		c.EagerLimit = min(DefaultEagerLimit, c.SegmentSize)
	}
	if c.PlanMin == 0 {
		c.PlanMin = 2 * c.FrameSize
	}
	if c.MaxPeerSegmentSize == 0 {
		c.MaxPeerSegmentSize = max(DefaultMaxPeerSegment, c.SegmentSize)
	}
	if c.MaxPeerSegmentSize < c.SegmentSize || c.MaxPeerSegmentSize > wire.MaxSegmentSize {
		return config{}, cfgErr("MaxPeerSegmentSize", c.MaxPeerSegmentSize, fmt.Sprintf("SegmentSize (%d)..%d bytes", c.SegmentSize, wire.MaxSegmentSize))
	}
	if c.EagerLimit > c.SegmentSize {
		return config{}, cfgErr("EagerLimit", c.EagerLimit, fmt.Sprintf("<= SegmentSize (%d); negative turns eager sends off", c.SegmentSize))
	}
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = DefaultMaxMessageSize
	}
	if c.MaxMessageSize < 1 || c.MaxMessageSize > 1<<40 {
		return config{}, cfgErr("MaxMessageSize", c.MaxMessageSize, "1..1 TiB")
	}
	minBuf := int64(reasm.Cost(uint64(c.MaxMessageSize)))
	if c.MaxReceiveBuffer == 0 {
		c.MaxReceiveBuffer = max(c.MaxMessageSize+64<<20, minBuf)
	}
	if c.MaxReceiveBuffer < minBuf || c.MaxReceiveBuffer > math.MaxInt64/2 {
		return config{}, cfgErr("MaxReceiveBuffer", c.MaxReceiveBuffer, fmt.Sprintf(">= the cost of a MaxMessageSize message (its buffer's capacity + %d) = %d bytes", reasm.Overhead, minBuf))
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.HandshakeTimeout < 0 {
		return config{}, cfgErr("HandshakeTimeout", c.HandshakeTimeout, "> 0")
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.IdleTimeout < 30*time.Millisecond {
		return config{}, cfgErr("IdleTimeout", c.IdleTimeout, ">= 30ms")
	}
	if c.RailTimeout == 0 {
		c.RailTimeout = min(DefaultRailTimeout, c.IdleTimeout)
	}
	if c.RailTimeout < 10*time.Millisecond || c.RailTimeout > c.IdleTimeout {
		return config{}, cfgErr("RailTimeout", c.RailTimeout, fmt.Sprintf("10ms..IdleTimeout (%v)", c.IdleTimeout))
	}
	if c.SessionGrace == 0 {
		c.SessionGrace = DefaultSessionGrace
	}
	if c.BusyPoll < 0 || c.BusyPoll > MaxBusyPoll {
		return config{}, cfgErr("BusyPoll", c.BusyPoll, fmt.Sprintf("0 (never) to %v", MaxBusyPoll))
	}
	if c.DispatchInterval != 0 && (c.DispatchInterval < MinDispatchInterval || c.DispatchInterval > MaxDispatchInterval) {
		return config{}, cfgErr("DispatchInterval", c.DispatchInterval, fmt.Sprintf("0 (continuous) or %v..%v", MinDispatchInterval, MaxDispatchInterval))
	}
	if c.MaxHandshakes == 0 {
		c.MaxHandshakes = DefaultMaxHandshakes
	}
	if c.MaxHandshakes < 1 {
		return config{}, cfgErr("MaxHandshakes", c.MaxHandshakes, ">= 1")
	}
	if c.MaxSessions == 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	if c.MaxListenerBuffer == 0 {
		c.MaxListenerBuffer = DefaultMaxListenerBuffer
	}
	if c.MaxListenerBuffer < c.MaxReceiveBuffer {
		return config{}, cfgErr("MaxListenerBuffer", c.MaxListenerBuffer, fmt.Sprintf(">= MaxReceiveBuffer (%d); 0 = default 16 GiB", c.MaxReceiveBuffer))
	}
	if c.MaxSessions < 1 {
		return config{}, cfgErr("MaxSessions", c.MaxSessions, ">= 1; 0 = default 128")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if dialing {
		if len(c.Rails) < 1 || len(c.Rails) > MaxRails {
			return config{}, cfgErr("Rails", fmt.Sprintf("%d entries", len(c.Rails)), fmt.Sprintf("1..%d", MaxRails))
		}
		rails := make([]Rail, len(c.Rails))
		for i, r := range c.Rails {
			if r.Addr == "" {
				return config{}, cfgErr(fmt.Sprintf("Rails[%d].Addr", i), `""`, "host:port")
			}
			if r.Local != "" {
				if _, err := netip.ParseAddr(r.Local); err != nil {
					return config{}, cfgErr(fmt.Sprintf("Rails[%d].Local", i), fmt.Sprintf("%q", r.Local), "an IP address")
				}
			}
			if r.Bandwidth < 0 || math.IsNaN(r.Bandwidth) || math.IsInf(r.Bandwidth, 0) {
				return config{}, cfgErr(fmt.Sprintf("Rails[%d].Bandwidth", i), r.Bandwidth, ">= 0 bits/s (0 = unknown)")
			}
			if r.Name == "" {
				r.Name = r.Addr
			}
			rails[i] = r
		}
		c.Rails = rails
		if _, err := c.newScheduler(len(rails)); err != nil {
			return config{}, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	for _, e := range []struct {
		name string
		set  *bool
	}{{PlaintextEnv, &c.Plaintext}, {InsecureEnv, &c.Insecure}} {
		switch v := os.Getenv(e.name); v {
		case "", "0", "false":
		case "1", "true":
			*e.set = true
		default:
			return config{}, cfgErr(e.name, fmt.Sprintf("%q", v), `"1", "true", "0", "false" or unset`)
		}
	}
	tok, err := token.Resolve(c.Token)
	if err != nil {
		return config{}, fmt.Errorf("%w: Token: %w", ErrConfig, err)
	}
	if len(tok) < MinTokenLength {
		if !c.Insecure {
			what := fmt.Sprintf("%d characters", len(tok))
			if tok == "" {
				what = "none (Token, " + TokenEnv + " and " + TokenFileEnv + " all empty)"
			}
			return config{}, cfgErr("Token", what, fmt.Sprintf("at least %d characters (`multirail token` prints one), or Insecure (--insecure, %s=1) on a trusted network", MinTokenLength, InsecureEnv))
		}
		weakTokenOnce.Do(func() {
			c.Logger.Warn("insecure: a token shorter than 32 characters (or none): anyone who can guess it can open sessions and read the traffic", "length", len(tok))
		})
	}
	return config{Config: c, token: []byte(tok)}, nil
}

func (c Config) newScheduler(rails int) (sched.Scheduler, error) {
	var bw []float64
	for _, r := range c.Rails {
		bw = append(bw, r.Bandwidth)
	}
	if len(bw) != rails {
		bw = nil
	}
	return sched.New(c.Scheduler, sched.Config{Rails: rails, SegmentSize: c.FrameSize, Bandwidths: bw, Seed: c.Seed, Options: c.SchedulerOptions})
}

// creditBatch is how much returned credit is announced at once rather
// than lazily: an eighth of the window.
func (c config) creditBatch() uint64 { return uint64(c.MaxReceiveBuffer) / 8 }

// NewToken returns a fresh random token (32 bytes from crypto/rand,
// base64url, 43 characters), as `multirail token` prints: for a program
// that starts both ends of its connections itself.
func NewToken() string { return token.Generate() }

// weakTokenOnce logs the warning about a weak token once per process.
var weakTokenOnce sync.Once
