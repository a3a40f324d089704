package topo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/multirail/multirail/internal/token"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/emu"
)

// ErrSpec is returned for a rail spec that cannot be built in one process
// (a tcp: rail between real hosts).
var ErrSpec = errors.New("topo: unsupported rail")

// DefaultHandshake bounds NewPair's dial and accept when PairConfig.Timeout
// is 0.
const DefaultHandshake = 10 * time.Second

// Links returns, for every spec, the address to dial to reach target over
// it: target itself for loop, an emulated link in front of target for emu
// (under the background-load steps loads(i) for rail i when loads is set).
// links[i] is nil for a loop rail. On an error, the links built so far are
// closed.
func Links(target string, specs []emu.Spec, loads func(rail int) []emu.Load, log *slog.Logger) (addrs []string, links []*emu.Link, err error) {
	for i, s := range specs {
		switch s.Kind {
		case emu.KindLoop:
			addrs, links = append(addrs, target), append(links, nil)
			continue
		case emu.KindEmu:
		default:
			closeLinks(links)
			return nil, nil, fmt.Errorf("%w %q: in-process rails are emu: and loop (use serve/send for tcp: rails)", ErrSpec, s.String())
		}
		var l []emu.Load
		if loads != nil {
			l = loads(i)
		}
		lc := s.LinkConfig(l)
		lc.Logger = log
		link, err := emu.NewLink(target, lc)
		if err != nil {
			closeLinks(links)
			return nil, nil, err
		}
		addrs, links = append(addrs, link.Addr()), append(links, link)
	}
	return addrs, links, nil
}

func closeLinks(links []*emu.Link) {
	for _, l := range links {
		if l != nil {
			_ = l.Close()
		}
	}
}

// PairConfig describes a pair of connected Conns.
type PairConfig struct {
	// Rails are the rails, emu: or loop; at least one.
	Rails []emu.Spec
	// Config configures both ends (its Rails field is ignored); the
	// emulated links log to its Logger.
	Config multirail.Config
	// Loads, when set, returns rail i's background-load steps.
	Loads func(rail int) []emu.Load
	// Name, when set, names rail i (default: its spec, e.g. emu:200mbit).
	Name func(rail int) string
	// Nominal gives both ends the rails' nominal rates
	// (multirail.Rail.Bandwidth = the spec's rate; 0 for loop). Only the
	// weighted scheduler needs them; leave them out for the others.
	Nominal bool
	// CloseListener closes the listener once the pair is connected: no
	// rail can rejoin after a failure then.
	CloseListener bool
	// Timeout bounds the dial and accept (default DefaultHandshake).
	Timeout time.Duration
}

// Pair is two connected Conns and what joins them.
type Pair struct {
	// Dialer dialed over the rails, Acceptor accepted them.
	Dialer, Acceptor *multirail.Conn
	// Links[i] is rail i's emulated link, nil for a loop rail.
	Links []*emu.Link
	// Rails are the rails as Dialer dialed them.
	Rails []multirail.Rail
	ln    *multirail.Listener
}

// NewPair listens on loopback, builds cfg.Rails in front of the listener,
// dials over them and accepts the connection.
func NewPair(ctx context.Context, cfg PairConfig) (*Pair, error) {
	if len(cfg.Rails) == 0 {
		return nil, fmt.Errorf("%w: PairConfig.Rails is empty; need at least one rail", ErrSpec)
	}
	name := cfg.Name
	if name == nil {
		name = func(i int) string { return cfg.Rails[i].String() }
	}
	lcfg, dcfg := cfg.Config, cfg.Config
	lcfg.Rails, dcfg.Rails = nil, nil
	if tok, err := token.Resolve(cfg.Config.Token); err != nil {
		return nil, err
	} else if tok == "" {
		// Both ends are ours: they share a fresh token.
		lcfg.Token = multirail.NewToken()
		dcfg.Token = lcfg.Token
	}
	for i, s := range cfg.Rails {
		r := multirail.Rail{Name: name(i)}
		if cfg.Nominal {
			r.Bandwidth = s.RateBps
		}
		// The accepting end learns the names (and rates) too, for its
		// own direction.
		lcfg.Rails = append(lcfg.Rails, r)
	}
	ln, err := multirail.Listen("127.0.0.1:0", lcfg)
	if err != nil {
		return nil, err
	}
	p := &Pair{ln: ln}
	addrs, links, err := Links(ln.Addr().String(), cfg.Rails, cfg.Loads, cfg.Config.Logger)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	p.Links = links
	for i, a := range addrs {
		r := lcfg.Rails[i]
		r.Addr = a
		dcfg.Rails = append(dcfg.Rails, r)
	}
	p.Rails = dcfg.Rails
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultHandshake
	}
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type accepted struct {
		c   *multirail.Conn
		err error
	}
	acc := make(chan accepted, 1)
	go func() { c, err := ln.Accept(hctx); acc <- accepted{c, err} }()
	p.Dialer, err = multirail.Dial(hctx, dcfg)
	if err != nil {
		cancel() // the accept gives up
	}
	a := <-acc
	p.Acceptor = a.c
	if err == nil {
		err = a.err
	}
	if err != nil {
		_ = p.Close()
		return nil, err
	}
	if cfg.CloseListener {
		_ = ln.Close()
	}
	return p, nil
}

// Close closes both ends, the links and the listener.
func (p *Pair) Close() error {
	var errs []error
	for _, c := range []*multirail.Conn{p.Dialer, p.Acceptor} {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	closeLinks(p.Links)
	if p.ln != nil {
		_ = p.ln.Close() // may be closed already (CloseListener)
	}
	return errors.Join(errs...)
}

// Ring is n connections in a ring: Out[i] is rank i's connection to rank
// i+1 (mod n), In[i] its connection from rank i-1.
type Ring struct {
	Out, In []*multirail.Conn
	// Pairs[i] is link i, from rank i to rank i+1.
	Pairs []*Pair
}

// NewRing builds a ring of n ranks; link i (from rank i to rank i+1) is a
// pair configured by link(i).
func NewRing(ctx context.Context, n int, link func(i int) PairConfig) (*Ring, error) {
	r := &Ring{Out: make([]*multirail.Conn, n), In: make([]*multirail.Conn, n)}
	for i := range n {
		p, err := NewPair(ctx, link(i))
		if err != nil {
			_ = r.Close()
			return nil, err
		}
		r.Pairs = append(r.Pairs, p)
		r.Out[i], r.In[(i+1)%n] = p.Dialer, p.Acceptor
	}
	return r, nil
}

// Close closes every link of the ring.
func (r *Ring) Close() error {
	var errs []error
	for _, p := range r.Pairs {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}
