package rdzv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	hs "github.com/multirail/multirail/internal/handshake"
	tokens "github.com/multirail/multirail/internal/token"
)

// TokenEnv is the environment variable read when the token given to
// Exchange or ServerConfig.Token is empty: the same as multirail.TokenEnv
// (and then, as there, the file MULTIRAIL_TOKEN_FILE names).
const TokenEnv = tokens.Env

// Card is what one rank publishes: its identity in the job and opaque
// data (the communicator puts its host identity, data port and interfaces
// there).
type Card struct {
	JobID      string
	Rank, Size int
	Data       []byte
}

// ErrAuth is wrapped by Exchange's error when the rank and the rendezvous
// do not share the token, or when a sealed frame of a tcp:// exchange
// does not open (it was altered on the way, or injected by someone who
// does not have the connection's keys).
var ErrAuth = errors.New("rdzv: authentication failed")

// RefusedError is returned by Exchange, at once and without retrying, when
// the rendezvous refused this rank for good: wrong token or a frame that
// does not open (it then wraps ErrAuth), a card that disagrees with the
// job (size, job id, rank out of range, the rank registered by another
// process), a stale file:// store, or a peer that does not speak the
// protocol.
type RefusedError struct {
	URL    string
	Reason string
	auth   bool
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("rdzv: rendezvous %s refused this rank: %s", e.URL, e.Reason)
}

// Is lets errors.Is(err, ErrAuth) see an authentication refusal.
func (e *RefusedError) Is(target error) bool { return target == ErrAuth && e.auth }

// WaitError is returned by Exchange when ctx is done before the table
// arrived. It wraps ctx's error.
type WaitError struct {
	URL        string
	Rank, Size int
	// Reached reports whether the server ever answered (tcp://); always
	// true for file://.
	Reached bool
	// Missing lists the ranks the server (or the file:// store) still
	// missed when last heard of, possibly only the first of them;
	// MissingCount is how many there were in all. Both are zero when
	// unknown.
	Missing      []int
	MissingCount int
	// Last is the last failure before the deadline (dial or connection
	// error), if any.
	Last error
	Err  error
}

func (e *WaitError) Error() string {
	if !e.Reached {
		last := "no answer"
		if e.Last != nil {
			last = e.Last.Error()
		}
		return fmt.Sprintf("rdzv: rendezvous server %s not reachable: %s (rank %d of %d gave up: %v)", e.URL, last, e.Rank, e.Size, e.Err)
	}
	if e.MissingCount > 0 {
		return fmt.Sprintf("rdzv: rendezvous %s: rank %d of %d gave up waiting for rank(s) %s (%d of %d registered): %v",
			e.URL, e.Rank, e.Size, formatRanges(rangesOf(e.Missing), e.MissingCount), e.Size-e.MissingCount, e.Size, e.Err)
	}
	if e.Last != nil {
		return fmt.Sprintf("rdzv: rendezvous %s: rank %d of %d gave up: %v: %v", e.URL, e.Rank, e.Size, e.Last, e.Err)
	}
	return fmt.Sprintf("rdzv: rendezvous %s: rank %d of %d gave up: %v", e.URL, e.Rank, e.Size, e.Err)
}

func (e *WaitError) Unwrap() error { return e.Err }

// Timing of the tcp:// client.
const (
	clientHandshakeTimeout = 10 * time.Second
	retryMin               = 20 * time.Millisecond
	retryMax               = 500 * time.Millisecond
)

// Exchange publishes card at the rendezvous url and returns the cards'
// data of all ranks, indexed by rank (card.Data at card.Rank).
//
// url is "tcp://host:port" (a Server; see NewServer) or "file:///abs/dir"
// (a directory shared by all ranks). token is the shared secret; empty
// means the MULTIRAIL_TOKEN environment variable, and when that is empty
// too, no secret (trusted networks only).
//
// Ranks start in any order and the server may not be up yet: Exchange
// retries until ctx is done, then returns a *WaitError naming the ranks
// still missing when the server told us (or saying the server was never
// reachable). A definite refusal (wrong token, a card that disagrees with
// the job) is a *RefusedError, returned at once.
func Exchange(ctx context.Context, url, token string, card Card) ([][]byte, error) {
	token, err := tokens.Resolve(token)
	if err != nil {
		return nil, fmt.Errorf("rdzv: %w", err)
	}
	if err := checkCard(card); err != nil {
		return nil, err
	}
	kind, where, err := parseURL(url)
	if err != nil {
		return nil, err
	}
	if kind == "file" {
		return exchangeFile(ctx, url, where, []byte(token), card)
	}
	return exchangeTCP(ctx, url, where, []byte(token), card)
}

func checkCard(c Card) error {
	if c.Size < 1 || c.Size > MaxSize {
		return fmt.Errorf("rdzv: card size %d is out of range: allowed 1..%d", c.Size, MaxSize)
	}
	if c.Rank < 0 || c.Rank >= c.Size {
		return fmt.Errorf("rdzv: card rank %d is out of range: allowed 0..%d for size %d", c.Rank, c.Size-1, c.Size)
	}
	if len(c.JobID) > MaxJobID {
		return fmt.Errorf("rdzv: card job id of %d bytes is too long: allowed at most %d", len(c.JobID), MaxJobID)
	}
	if len(c.Data) > MaxCardLimit {
		return fmt.Errorf("rdzv: card data of %d bytes is too large: allowed at most %d", len(c.Data), MaxCardLimit)
	}
	return nil
}

// parseURL splits a rendezvous url into its kind ("tcp" or "file") and
// address or directory.
func parseURL(s string) (kind, where string, err error) {
	const allowed = `allowed: tcp://HOST:PORT or file:///ABSOLUTE/DIR`
	u, err := url.Parse(s)
	if err != nil {
		return "", "", fmt.Errorf("rdzv: rendezvous url %q: %v; %s", s, err, allowed)
	}
	switch u.Scheme {
	case "tcp":
		host, port, err := net.SplitHostPort(u.Host)
		if err != nil || host == "" || port == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			return "", "", fmt.Errorf("rdzv: rendezvous url %q: want tcp://HOST:PORT; %s", s, allowed)
		}
		return "tcp", u.Host, nil
	case "file":
		if (u.Host != "" && u.Host != "localhost") || !filepath.IsAbs(u.Path) || u.RawQuery != "" {
			return "", "", fmt.Errorf("rdzv: rendezvous url %q: want file:// and an absolute directory, e.g. file:///tmp/job-42; %s", s, allowed)
		}
		return "file", filepath.Clean(u.Path), nil
	}
	return "", "", fmt.Errorf("rdzv: rendezvous url %q: unknown scheme %q; %s", s, u.Scheme, allowed)
}

// sleepCtx waits d or until ctx is done (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// jitter spreads d by ±20 % so that ranks do not retry in lock step.
func jitter(d time.Duration) time.Duration {
	return d*4/5 + time.Duration(rand.Int64N(int64(d)*2/5+1))
}

// tcpClient is one rank's state across its attempts.
type tcpClient struct {
	url, addr string
	token     []byte
	card      Card
	reached   bool
	status    *status
}

func exchangeTCP(ctx context.Context, u, addr string, token []byte, card Card) ([][]byte, error) {
	c := &tcpClient{url: u, addr: addr, token: token, card: card}
	wait := retryMin
	var last error
	for {
		table, err := c.attempt(ctx)
		if err == nil {
			return table, nil
		}
		var ref *RefusedError
		if errors.As(err, &ref) {
			return nil, err
		}
		if ctx.Err() == nil {
			last = err
		}
		if ctx.Err() != nil || !sleepCtx(ctx, jitter(wait)) {
			we := &WaitError{URL: u, Rank: card.Rank, Size: card.Size, Reached: c.reached, Last: last, Err: ctx.Err()}
			if c.status != nil {
				we.MissingCount = c.status.missing
				for _, r := range c.status.ranges {
					for i := r[0]; i <= r[1]; i++ {
						we.Missing = append(we.Missing, i)
					}
				}
			}
			return nil, we
		}
		wait = min(2*wait, retryMax)
	}
}

// attempt runs one connection: handshake, card, wait for the table.
// Errors other than a *RefusedError are worth a retry.
func (c *tcpClient) attempt(ctx context.Context) ([][]byte, error) {
	d := net.Dialer{KeepAlive: 15 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	// Cancelling ctx closes the connection: every read and write fails.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	conn.SetDeadline(time.Now().Add(clientHandshakeTimeout))

	send, recv, err := c.handshake(conn)
	if err != nil {
		return nil, err
	}
	refused := func(format string, args ...any) error {
		return &RefusedError{URL: c.url, Reason: fmt.Sprintf(format, args...)}
	}
	if err := writeSealed(conn, send, tCard, appendCardBody(nil, c.card)); err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	for {
		typ, body, err := readSealed(conn, recv, 1+MaxTable)
		switch {
		case errors.Is(err, hs.ErrAuth):
			return nil, c.notOpen(err)
		case errors.Is(err, errFrame):
			return nil, refused("protocol error: %v", err)
		case err != nil:
			return nil, fmt.Errorf("waiting for the table: %w", err)
		}
		switch typ {
		case tStatus:
			st, err := decodeStatus(body)
			if err != nil {
				return nil, refused("protocol error: %v", err)
			}
			c.status = &st
		case tError:
			return nil, c.serverError(body)
		case tTable:
			table, err := decodeTable(body, c.card.Size)
			if err != nil {
				return nil, refused("bad table from the server: %v", err)
			}
			if !bytes.Equal(table[c.card.Rank], c.card.Data) {
				return nil, refused("the server's table has other data for rank %d than this rank sent", c.card.Rank)
			}
			// Confirm, so that the server can stop; the table is ours
			// whatever happens to the confirmation.
			conn.SetWriteDeadline(time.Now().Add(time.Second))
			writeSealed(conn, send, tAck, nil)
			return table, nil
		default:
			return nil, refused("protocol error: frame type %d while waiting for the table", typ)
		}
	}
}

// handshake reads the server's hello and runs the Noise handshake as its
// initiator: noise1 proves that this rank knows the token, noise2 that
// the server does. It returns the ciphers of the two directions.
func (c *tcpClient) handshake(conn net.Conn) (send, recv *hs.Cipher, err error) {
	refused := func(format string, args ...any) error {
		return &RefusedError{URL: c.url, Reason: fmt.Sprintf(format, args...)}
	}
	typ, body, err := readFrame(conn, max(helloLen, maxErrorLen))
	if err != nil {
		if errors.Is(err, errFrame) {
			return nil, nil, refused("%s is not a multirail rendezvous server: %v", c.addr, err)
		}
		return nil, nil, fmt.Errorf("reading the server's hello: %w", err)
	}
	if typ != tHello {
		return nil, nil, refused("%s is not a multirail rendezvous server (first frame type %d of %d bytes)", c.addr, typ, len(body))
	}
	v, err := parseHello(body)
	if err != nil {
		return nil, nil, refused("%s is not a multirail rendezvous server: %v", c.addr, err)
	}
	c.reached = true
	if v != version {
		return nil, nil, refused("the server speaks rendezvous protocol version %d, this rank version %d", v, version)
	}
	st, err := newState(true, body, c.token)
	if err != nil {
		return nil, nil, err
	}
	msg1, _, _, err := st.WriteMessage([]byte{version}, nil)
	if err != nil {
		return nil, nil, err
	}
	if err := writeFrame(conn, tNoise1, msg1); err != nil {
		return nil, nil, err
	}
	typ, body, err = readFrame(conn, max(noise2Len, maxErrorLen))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the server's noise2: %w", err)
	}
	switch {
	case typ == tError:
		return nil, nil, c.serverError(body)
	case typ != tNoise2 || len(body) != noise2Len-1:
		return nil, nil, refused("protocol error: frame type %d of %d bytes, want the server's noise2 (type %d, %d bytes)", typ, len(body), tNoise2, noise2Len-1)
	}
	payload, cs1, cs2, err := st.ReadMessage(nil, body)
	if err != nil || len(payload) != 0 || cs1 == nil || cs2 == nil {
		return nil, nil, &RefusedError{URL: c.url, Reason: fmt.Sprintf("authentication failed: the server at %s does not prove it knows this rank's token (%s)", c.addr, TokenEnv), auth: true}
	}
	return hs.NewCipher(cs1), hs.NewCipher(cs2), nil
}

// notOpen is the refusal for a sealed frame from the server that does not
// open (err wraps handshake.ErrAuth).
func (c *tcpClient) notOpen(err error) error {
	return &RefusedError{URL: c.url, auth: true, Reason: fmt.Sprintf("authentication failed: a frame from the server at %s does not open: altered on the way, or not sent by the server this rank authenticated (%v)", c.addr, err)}
}

// serverError turns an error frame into a refusal.
func (c *tcpClient) serverError(body []byte) error {
	if len(body) < 1 {
		return &RefusedError{URL: c.url, Reason: "empty error frame"}
	}
	text := strings.ToValidUTF8(string(body[1:]), "?")
	return &RefusedError{URL: c.url, Reason: text, auth: body[0] == codeAuth}
}
