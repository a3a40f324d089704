package coll

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
)

// errInjected is the error a failing rank's transport returns.
var errInjected = errors.New("injected transport failure")

// meshOpts tunes the in-memory transport.
type meshOpts struct {
	// rendezvous makes Send return only once the message has been
	// received, stricter than the Transport contract requires.
	rendezvous bool
	// misalign delivers some messages (depending on src, dst and step) in
	// buffers misaligned for 4- and 8-byte elements.
	misalign bool
	// try gives the endpoints a TrySend (TrySender) that sends when the
	// mailbox would not make Send wait (not rendezvous) and declines one
	// triple in three, so that exchanges take both paths.
	try bool
	// lazy keeps the sender's buffer and copies it only when the
	// receiver takes the message, Send returning after that (a transport
	// that writes from the caller's memory): a collective that overwrote
	// elements a send of it still reads would deliver the new values.
	lazy bool
	// framing is what the endpoints' Framing returns (the zero value:
	// DefaultFraming).
	framing Framing
	// failRank's Send and Recv fail with errInjected from its failAt-th
	// call on (counting from 0); failRank < 0 for none.
	failRank, failAt int
}

type meshKey struct{ src, dst, step int }

// mailbox carries one message: Send fills it, Recv empties it.
type mailbox struct {
	ch          chan []byte // capacity 1: Send never waits for Recv
	taken       chan struct{}
	sent, recvd bool
}

// mesh is an in-memory network of n ranks for one collective call: a
// mailbox per (src, dst, step). It checks the Transport contract as it
// goes (each triple used once, valid peers and steps) and, with verify,
// that every message sent was received.
type mesh struct {
	n    int
	opts meshOpts

	tried atomic.Int64 // sends made by TrySend

	mu         sync.Mutex
	boxes      map[meshKey]*mailbox
	violations []string
}

func newMesh(n int, opts meshOpts) *mesh {
	return &mesh{n: n, opts: opts, boxes: make(map[meshKey]*mailbox)}
}

// endpoints returns the n ranks' transports.
func (m *mesh) endpoints() []*endpoint {
	eps := make([]*endpoint, m.n)
	for r := range eps {
		eps[r] = &endpoint{m: m, rank: r}
	}
	return eps
}

// box returns k's mailbox after checking the triple is used once in
// direction dir ("send" or "recv").
func (m *mesh) box(k meshKey, dir string) (*mailbox, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.boxes[k]
	if b == nil {
		b = &mailbox{ch: make(chan []byte, 1), taken: make(chan struct{})}
		m.boxes[k] = b
	}
	used := &b.sent
	if dir == "recv" {
		used = &b.recvd
	}
	if *used {
		err := fmt.Errorf("contract violation: second %s of (src %d, dst %d, step %d)", dir, k.src, k.dst, k.step)
		m.violations = append(m.violations, err.Error())
		return nil, err
	}
	*used = true
	return b, nil
}

func (m *mesh) violate(format string, args ...any) error {
	err := fmt.Errorf("contract violation: "+format, args...)
	m.mu.Lock()
	m.violations = append(m.violations, err.Error())
	m.mu.Unlock()
	return err
}

// verify reports contract violations and messages sent but never received
// or awaited but never sent.
func (m *mesh) verify() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	problems := slices.Clone(m.violations)
	for k, b := range m.boxes {
		if b.sent != b.recvd {
			problems = append(problems, fmt.Sprintf("(src %d, dst %d, step %d): sent %v, received %v", k.src, k.dst, k.step, b.sent, b.recvd))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	sort.Strings(problems)
	return errors.New(fmt.Sprint(problems))
}

// endpoint is one rank's Transport on a mesh.
type endpoint struct {
	m    *mesh
	rank int
	ops  atomic.Int64
}

func (e *endpoint) Rank() int { return e.rank }
func (e *endpoint) Size() int { return e.m.n }

func (e *endpoint) check(peer, step int) error {
	if e.m.opts.failRank == e.rank && e.ops.Add(1)-1 >= int64(e.m.opts.failAt) {
		return errInjected
	}
	if peer < 0 || peer >= e.m.n || peer == e.rank || step < 0 {
		return e.m.violate("rank %d: bad peer %d or step %d", e.rank, peer, step)
	}
	return nil
}

func (e *endpoint) Send(ctx context.Context, dst, step int, b []byte) error {
	if err := e.check(dst, step); err != nil {
		return err
	}
	box, err := e.m.box(meshKey{e.rank, dst, step}, "send")
	if err != nil {
		return err
	}
	if e.m.opts.lazy {
		box.ch <- b // copied by the receiver
	} else {
		box.ch <- slices.Clone(b)
	}
	if !e.m.opts.rendezvous && !e.m.opts.lazy {
		return nil
	}
	select {
	case <-box.taken:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *endpoint) Framing() Framing {
	if e.m.opts.framing == (Framing{}) {
		return DefaultFraming
	}
	return e.m.opts.framing
}

func (e *endpoint) TrySend(ctx context.Context, dst, step int, b []byte) (bool, error) {
	if !e.m.opts.try || e.m.opts.rendezvous || e.m.opts.lazy || (e.rank+dst+step)%3 == 0 {
		return false, nil
	}
	e.m.tried.Add(1)
	return true, e.Send(ctx, dst, step, b)
}

func (e *endpoint) Recv(ctx context.Context, src, step int) ([]byte, error) {
	if err := e.check(src, step); err != nil {
		return nil, err
	}
	box, err := e.m.box(meshKey{src, e.rank, step}, "recv")
	if err != nil {
		return nil, err
	}
	select {
	case b := <-box.ch:
		if e.m.opts.lazy {
			b = slices.Clone(b)
		}
		close(box.taken)
		if e.m.opts.misalign && (src+e.rank+step)%2 == 1 {
			mis := make([]byte, len(b)+1)[1:]
			copy(mis, b)
			b = mis
		}
		if b == nil {
			b = []byte{}
		}
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// runRanks runs fn for every rank of m but absent (-1 for none), one
// goroutine each, and returns their errors. With cancelOnErr the first
// error cancels the others' context, as a communicator aborting a failed
// call would.
func runRanks(ctx context.Context, m *mesh, absent int, cancelOnErr bool, fn func(ctx context.Context, t Transport) error) []error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, m.n)
	var wg sync.WaitGroup
	for _, ep := range m.endpoints() {
		if ep.rank == absent {
			continue
		}
		wg.Go(func() {
			err := fn(ctx, ep)
			errs[ep.rank] = err
			if err != nil && cancelOnErr {
				cancel()
			}
		})
	}
	wg.Wait()
	return errs
}
