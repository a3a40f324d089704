package comm

import (
	"context"
	"errors"
	"fmt"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/comm/internal/coll"
)

// Loss-tolerant allreduce over the communicator's connections: every peer
// connection carries, besides everything else, one shared StageConn per
// communicator on reserved tags.

type lossyState struct {
	red lossyReducer
	cfg RingConfig
}

// lossyReducer is a Ring or a Transpose.
type lossyReducer interface {
	Allreduce(ctx context.Context, x []float32) error
	ReportQuality(ctx context.Context, q float64) error
	Stats() RingStats
}

// stageKey is the part of a communicator id the stage tags carry.
func stageKey(id uint64) uint32 { return uint32(id & 0x7fff) }

func stageTags(key uint32) (packet, feedback uint32) {
	base := connTagStage + 2*key
	return base, base + 1
}

// stageConnLocked returns p's stage connection for communicator key,
// creating it when needed.
func (w *world) stageConnLocked(p *peer, key uint32) (*multirail.StageConn, error) {
	if s := p.stages[key]; s != nil {
		return s, nil
	}
	cfg := w.cfg.Stage
	cfg.Shared = true
	cfg.PacketTag, cfg.FeedbackTag = stageTags(key)
	cfg.Seed ^= uint64(w.rank)<<32 | uint64(p.rank)<<16 | uint64(key)
	if cfg.Logger == nil {
		cfg.Logger = w.log
	}
	s, err := multirail.NewStageConn(p.conn, cfg)
	if err != nil {
		return nil, err
	}
	if p.stages == nil {
		p.stages = make(map[uint32]*multirail.StageConn)
	}
	p.stages[key] = s
	if p.err != nil {
		s.Fail(p.err)
	}
	return s, nil
}

// deliverStage hands a stage message to its StageConn.
func (w *world) deliverStage(ctx context.Context, p *peer, m multirail.Message) error {
	key := (m.Tag - connTagStage) / 2
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	s, err := w.stageConnLocked(p, key)
	w.mu.Unlock()
	if err != nil {
		return err
	}
	return s.Deliver(ctx, multirail.Message{Tag: m.Tag, Data: m.Data})
}

// stageLink is the ring's transport over two stage connections.
type stageLink = StageLink

func (c *Comm) lossyAllreduce(ctx context.Context, buf any, dtype uint8, op Op, o collOpts) error {
	x, ok := buf.([]float32)
	if !ok || dtype != dtFloat32 {
		return fmt.Errorf("%w: allreduce: the LossTolerant option needs []float32, got %s", ErrConfig, dtypeName(dtype))
	}
	cfg := *o.lossy
	cfg.Op = op
	return c.collective(ctx, CollAllreduce, dtype, 4, op, -1, len(x), collOpts{algo: AlgoRing}, func(_ coll.Transport, _ Algo) error {
		if op != Sum && op != Mean {
			return fmt.Errorf("%w: allreduce: LossTolerant takes op sum or mean, got %s", ErrConfig, op)
		}
		if c.lossy == nil || c.lossy.cfg != cfg {
			red, err := c.newLossy(cfg)
			if err != nil {
				return err
			}
			c.lossy = &lossyState{red: red, cfg: cfg}
		}
		// A failure elsewhere (a notice) must interrupt a ring waiting for
		// a stage.
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			select {
			case <-c.cs.collFail:
				cancel()
			case <-stop:
			}
		}()
		err := c.lossy.red.Allreduce(rctx, x)
		if err != nil && ctx.Err() == nil && errors.Is(err, context.Canceled) {
			c.w.mu.Lock()
			err = c.cs.collErr
			c.w.mu.Unlock()
		}
		return err
	})
}

// newLossy builds this rank's side of the loss-tolerant allreduce: a
// Transpose over a stage connection to every peer, or with cfg.Ring a Ring
// over the neighbours'.
func (c *Comm) newLossy(cfg RingConfig) (lossyReducer, error) {
	n := len(c.ranks)
	if n == 1 {
		if cfg.Ring {
			return NewRing(0, 1, nil, cfg)
		}
		return NewTranspose(0, 1, nil, cfg)
	}
	w := c.w
	w.mu.Lock()
	defer w.mu.Unlock()
	key := stageKey(c.id)
	if cfg.Ring {
		next, err := w.stageConnLocked(w.peers[c.ranks[(c.rank+1)%n]], key)
		if err != nil {
			return nil, err
		}
		prev, err := w.stageConnLocked(w.peers[c.ranks[(c.rank+n-1)%n]], key)
		if err != nil {
			return nil, err
		}
		return NewRing(c.rank, n, stageLink{Next: next, Prev: prev}, cfg)
	}
	mesh := make(StageMesh, n)
	for i, r := range c.ranks {
		if i == c.rank {
			continue
		}
		s, err := w.stageConnLocked(w.peers[r], key)
		if err != nil {
			return nil, err
		}
		mesh[i] = s
	}
	return NewTranspose(c.rank, n, mesh, cfg)
}

// LossyStats returns the counters of this rank's loss-tolerant Allreduce
// calls on c (packets sent, discarded, received, missing), zero before the
// first. A call with another RingConfig than the last starts them anew.
func (c *Comm) LossyStats() RingStats {
	c.collMu.Lock()
	defer c.collMu.Unlock()
	if c.lossy == nil {
		return RingStats{}
	}
	return c.lossy.red.Stats()
}

// ReportQuality reports the quality of the last loss-tolerant Allreduce's
// result (higher is better; for training, how much the loss went down) to
// the ranks whose discard controllers produced it.
func (c *Comm) ReportQuality(ctx context.Context, q float64) error {
	c.collMu.Lock()
	l := c.lossy
	c.collMu.Unlock()
	if l == nil {
		return fmt.Errorf("comm: ReportQuality before any loss-tolerant Allreduce")
	}
	return l.red.ReportQuality(ctx, q)
}
