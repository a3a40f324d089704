package bench

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"sync"
	"time"

	"github.com/multirail/multirail/emu"
	"github.com/multirail/multirail/internal/measure"
	"github.com/multirail/multirail/internal/topo"
)

// Baseline is a plain TCP stream (or one TLS 1.3 stream) over the same
// kind of path.
type Baseline struct {
	// Kind is "tcp" or "tls".
	Kind       string  `json:"kind"`
	GoodputBps float64 `json:"goodput_bps"`
	// LatencyP50 is the 1-byte round trip of plain TCP (compare with
	// Result.RTTP50).
	LatencyP50 float64 `json:"latency_p50_s"`
}

// TCPPath is the plain TCP side of a comparison: one TCP stream over a
// path like a rail spec (an emulated link for emu:, loopback for loop) and
// a second connection for 1-byte round trips, both kept open so that the
// measurement can be cut into slices taken in turns with multirail's
// (Options.Baseline): a machine whose speed wanders between seconds then
// moves both sides alike. Stream and Ping add to its totals; Result says
// what they come to. A TCPPath is used by one goroutine at a time.
type TCPPath struct {
	msg        []byte
	ln         net.Listener
	link       *emu.Link
	tls        *tls.Config // non-nil: both connections are TLS 1.3
	cc, pc     net.Conn    // the stream's writer, the round trips' client
	sc, echo   net.Conn
	readerDone chan struct{}
	echoDone   chan struct{}

	read counter // bytes the stream's reader has read

	total   int64 // bytes written ever (the reader's count waits for it)
	written int64 // bytes written in the slices that count
	took    time.Duration
	streams int // Stream calls that counted
	rtts    []float64
}

// NewTCPPath connects a plain TCP stream and a round-trip connection over
// a path like spec; the stream writes size-byte messages. With withTLS,
// both connections run TLS 1.3 (crypto/tls, its default cipher suite
// choice, a throw-away ECDSA P-256 certificate): the encrypted stream
// multirail's sealed frames are measured against.
func NewTCPPath(ctx context.Context, spec emu.Spec, size int, withTLS bool) (*TCPPath, error) {
	if size <= 0 {
		return nil, fmt.Errorf("bench: baseline message size %d; want > 0", size)
	}
	var tc *tls.Config
	if withTLS {
		var err error
		if tc, err = selfSigned(); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	t := &TCPPath{ln: ln, tls: tc, msg: Payload(size), readerDone: make(chan struct{}), echoDone: make(chan struct{})}
	addrs, links, err := topo.Links(ln.Addr().String(), []emu.Spec{spec}, nil, nil)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	t.link = links[0]
	if t.cc, t.sc, err = t.connect(ctx, addrs[0]); err == nil {
		t.pc, t.echo, err = t.connect(ctx, addrs[0])
	}
	if err != nil {
		t.closeConns()
		close(t.readerDone)
		close(t.echoDone)
		return nil, err
	}
	go t.reader(size)
	go t.echoer()
	return t, nil
}

// connect dials the path and accepts the other end.
func (t *TCPPath) connect(ctx context.Context, addr string) (net.Conn, net.Conn, error) {
	type acc struct {
		c   net.Conn
		err error
	}
	accc := make(chan acc, 1)
	go func() { c, err := t.ln.Accept(); accc <- acc{c, err} }()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		_ = t.ln.Close() // the accept gives up
		<-accc
		return nil, nil, err
	}
	a := <-accc
	if a.err != nil {
		_ = c.Close()
		return nil, nil, a.err
	}
	if t.tls == nil {
		return c, a.c, nil
	}
	cc, sc := tls.Client(c, t.tls), tls.Server(a.c, t.tls)
	herr := make(chan error, 1)
	go func() { herr <- sc.HandshakeContext(ctx) }()
	err = cc.HandshakeContext(ctx)
	if err2 := <-herr; err == nil {
		err = err2
	}
	if err != nil {
		_ = c.Close()
		_ = a.c.Close()
		return nil, nil, fmt.Errorf("bench: TLS baseline handshake: %w", err)
	}
	return cc, sc, nil
}

// selfSigned returns a TLS 1.3 configuration for both ends of a loopback
// baseline: a fresh self-signed certificate for "localhost", trusted by
// the client side.
func selfSigned() (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{
		MinVersion: tls.VersionTLS13, ServerName: "localhost", RootCAs: pool,
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}},
	}, nil
}

// reader counts the stream's bytes until it ends.
func (t *TCPPath) reader(size int) {
	defer close(t.readerDone)
	buf := make([]byte, max(size, 256<<10))
	for {
		k, err := t.sc.Read(buf)
		t.read.add(int64(k))
		if err != nil {
			t.read.fail(err)
			return
		}
	}
}

// echoer returns every byte of the round-trip connection.
func (t *TCPPath) echoer() {
	defer close(t.echoDone)
	var one [1]byte
	for {
		if _, err := io.ReadFull(t.echo, one[:]); err != nil {
			return
		}
		if _, err := t.echo.Write(one[:]); err != nil {
			return
		}
	}
}

// Stream writes messages back to back for d, then waits until the reader
// has all of them; the bytes and the time up to then count towards the
// goodput.
func (t *TCPPath) Stream(ctx context.Context, d time.Duration) error {
	start := time.Now()
	end := start.Add(d)
	_ = t.cc.SetWriteDeadline(end.Add(time.Minute)) // a stuck path fails, it does not hang
	var n int64
	for time.Now().Before(end) && ctx.Err() == nil {
		k, err := t.cc.Write(t.msg)
		n += int64(k)
		if err != nil {
			return fmt.Errorf("bench: baseline stream: %w", err)
		}
	}
	t.total += n
	if err := t.read.waitFor(ctx, t.total); err != nil {
		return fmt.Errorf("bench: baseline stream: %w", err)
	}
	t.written += n
	t.took += time.Since(start)
	t.streams++
	return nil
}

// Warmup streams for d and a few round trips and forgets them: the first
// transfer of a connection is slower (fresh buffers fault in, windows
// grow), as multirail's warm-up run knows.
func (t *TCPPath) Warmup(ctx context.Context, d time.Duration) error {
	if err := t.Stream(ctx, d); err != nil {
		return err
	}
	if err := t.Ping(ctx, 10); err != nil {
		return err
	}
	t.written, t.took, t.streams, t.rtts = 0, 0, 0, t.rtts[:0]
	return nil
}

// Ping measures n 1-byte round trips.
func (t *TCPPath) Ping(ctx context.Context, n int) error {
	var one [1]byte
	for i := 0; i < n && ctx.Err() == nil; i++ {
		t0 := time.Now()
		if _, err := t.pc.Write(one[:]); err != nil {
			return fmt.Errorf("bench: baseline round trip: %w", err)
		}
		if _, err := io.ReadFull(t.pc, one[:]); err != nil {
			return fmt.Errorf("bench: baseline round trip: %w", err)
		}
		t.rtts = append(t.rtts, time.Since(t0).Seconds())
	}
	return ctx.Err()
}

// Result is the goodput of every Stream so far and the median of every
// round trip.
func (t *TCPPath) Result() Baseline {
	b := Baseline{Kind: "tcp"}
	if t.tls != nil {
		b.Kind = "tls"
	}
	if t.took > 0 {
		b.GoodputBps = float64(t.written) * 8 / t.took.Seconds()
	}
	b.LatencyP50 = measure.Percentile(t.rtts, 0.5)
	return b
}

func (t *TCPPath) closeConns() {
	for _, c := range []net.Conn{t.cc, t.sc, t.pc, t.echo} {
		if c != nil {
			_ = c.Close()
		}
	}
	_ = t.ln.Close()
	if t.link != nil {
		_ = t.link.Close()
	}
}

// Close closes the connections and waits for the goroutines.
func (t *TCPPath) Close() error {
	t.closeConns()
	<-t.readerDone
	<-t.echoDone
	return nil
}

// TCPBaseline measures one plain TCP stream over a path like spec with
// size-byte writes for duration, then 2000 1-byte round trips, in one
// piece (Options.Baseline takes them in slices between multirail's).
func TCPBaseline(ctx context.Context, spec emu.Spec, size int, duration time.Duration, withTLS bool) (Baseline, error) {
	t, err := NewTCPPath(ctx, spec, size, withTLS)
	if err != nil {
		return Baseline{}, err
	}
	defer t.Close()
	if err := t.Stream(ctx, duration); err != nil {
		return Baseline{}, err
	}
	if err := t.Ping(ctx, rttRounds); err != nil {
		return Baseline{}, err
	}
	return t.Result(), nil
}

// rttRounds is how many 1-byte round trips a run measures.
const rttRounds = 2000

// counter is a count that one goroutine adds to and another waits on.
type counter struct {
	mu      sync.Mutex
	n, want int64
	reached chan struct{} // closed when n reaches want or the count fails
	err     error
}

// add adds k to the count.
func (c *counter) add(k int64) {
	c.mu.Lock()
	c.n += k
	if c.reached != nil && c.n >= c.want {
		close(c.reached)
		c.reached = nil
	}
	c.mu.Unlock()
}

// fail ends the count with err: waitFor returns it.
func (c *counter) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	if c.reached != nil {
		close(c.reached)
		c.reached = nil
	}
	c.mu.Unlock()
}

// waitFor waits until the count reaches want, the count fails or ctx ends.
func (c *counter) waitFor(ctx context.Context, want int64) error {
	c.mu.Lock()
	if c.n >= want || c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	c.want = want
	ch := make(chan struct{})
	c.reached = ch
	c.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
		return ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}
