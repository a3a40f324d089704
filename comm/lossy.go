package comm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/comm/internal/coll"
	"github.com/multirail/multirail/lossy"
)

// Loss-tolerant allreduce over the communicator's connections: every peer
// connection carries, besides everything else, one shared StageConn per
// communicator on reserved tags.

type lossyState struct {
	red lossy.Allreducer
	cfg lossy.Config
}

// stageKey is the part of a communicator id and stream the stage tags
// carry: for stream 0 the id's low bits, for others a hash of both.
func stageKey(id, stream uint64) uint32 {
	if stream == 0 {
		return uint32(id & 0x7fff)
	}
	h := fnv.New64a()
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:], id)
	binary.LittleEndian.PutUint64(b[8:], stream)
	_, _ = h.Write(b[:])
	return uint32(h.Sum64() & 0x7fff)
}

// WithStream keys the state of a LossTolerant Allreduce by stream id: the
// discard controllers, the error-feedback residuals and the stages that
// ReportQualityStream reports on. Independent sequences of calls on one
// communicator (the buckets of a DDP model, say) each take their own
// stream, so none resets or feeds another's state; calls without it are
// stream 0. Every rank passes the same stream to the same call. Streams
// share the stage tags' 15-bit space with communicators: two that collide
// on this rank make the second fail with ErrConfig instead of mixing.
func WithStream(id uint64) CollOption { return func(o *collOpts) { o.stream = id } }

func stageTags(key uint32) (packet, feedback uint32) {
	base := connTagStage + 2*key
	return base, base + 1
}

// stageConnLocked returns p's stage connection for communicator key,
// creating it when needed.
func (w *world) stageConnLocked(p *peer, key uint32) (*lossy.StageConn, error) {
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
	cfg.Logger = cfg.Logger.With("peer", p.rank)
	s, err := lossy.NewStageConn(p.conn, cfg)
	if err != nil {
		return nil, err
	}
	if p.stages == nil {
		p.stages = make(map[uint32]*lossy.StageConn)
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

func (c *Comm) lossyAllreduce(ctx context.Context, buf any, dtype uint8, op Op, o collOpts) error {
	x, ok := buf.([]float32)
	if !ok || dtype != dtFloat32 {
		return fmt.Errorf("%w: allreduce: the LossTolerant option needs []float32, got %s", ErrConfig, dtypeName(dtype))
	}
	cfg := *o.lossy
	cfg.Mean = op == Mean
	return c.collective(ctx, CollAllreduce, dtype, 4, op, -1, len(x), collOpts{algo: AlgoRing}, func(_ coll.Transport, _ Algo) error {
		if op != Sum && op != Mean {
			return fmt.Errorf("%w: allreduce: LossTolerant takes op sum or mean, got %s", ErrConfig, op)
		}
		l := c.lossy[o.stream]
		if l == nil || l.cfg != cfg {
			red, err := c.newLossy(cfg, o.stream)
			if err != nil {
				return wrapLossy(err)
			}
			l = &lossyState{red: red, cfg: cfg}
			if c.lossy == nil {
				c.lossy = make(map[uint64]*lossyState)
			}
			c.lossy[o.stream] = l
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
		err := l.red.Allreduce(rctx, x)
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
func (c *Comm) newLossy(cfg lossy.Config, stream uint64) (lossy.Allreducer, error) {
	n := len(c.ranks)
	if n == 1 {
		if cfg.Ring {
			return lossy.NewRing(0, 1, nil, cfg)
		}
		return lossy.NewTranspose(0, 1, nil, cfg)
	}
	w := c.w
	w.mu.Lock()
	defer w.mu.Unlock()
	key := stageKey(c.id, stream)
	owner := stageOwner{c.id, stream}
	if o, ok := w.stageOwners[key]; ok && o != owner {
		return nil, fmt.Errorf("%w: allreduce: loss-tolerant stream %d of communicator %#x shares stage tags %d with stream %d of communicator %#x on this rank; pick another stream id", ErrConfig, stream, c.id, key, o.stream, o.id)
	}
	if w.stageOwners == nil {
		w.stageOwners = make(map[uint32]stageOwner)
	}
	w.stageOwners[key] = owner
	if cfg.Ring {
		next, err := w.stageConnLocked(w.peers[c.ranks[(c.rank+1)%n]], key)
		if err != nil {
			return nil, err
		}
		prev, err := w.stageConnLocked(w.peers[c.ranks[(c.rank+n-1)%n]], key)
		if err != nil {
			return nil, err
		}
		return lossy.NewRing(c.rank, n, lossy.StageLink{Next: next, Prev: prev}, cfg)
	}
	mesh := make(lossy.StageMesh, n)
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
	return lossy.NewTranspose(c.rank, n, mesh, cfg)
}

// stageOwner is the communicator and stream whose stages a key carries.
type stageOwner struct{ id, stream uint64 }

// LossyStats returns the counters of this rank's loss-tolerant Allreduce
// calls on c's stream 0 (packets sent, discarded, received, missing), zero
// before the first. A call with another lossy.Config than the last starts
// them anew.
func (c *Comm) LossyStats() lossy.Stats { return c.LossyStatsStream(0) }

// LossyStatsStream is LossyStats of one stream (WithStream).
func (c *Comm) LossyStatsStream(stream uint64) lossy.Stats {
	c.collMu.Lock()
	defer c.collMu.Unlock()
	if l := c.lossy[stream]; l != nil {
		return l.red.Stats()
	}
	return lossy.Stats{}
}

// ReportQuality reports the quality of the last loss-tolerant Allreduce's
// result on stream 0 (higher is better; for training, how much the loss
// went down) to the ranks whose discard controllers produced it.
func (c *Comm) ReportQuality(ctx context.Context, q float64) error {
	return c.ReportQualityStream(ctx, 0, q)
}

// ReportQualityStream is ReportQuality for the last loss-tolerant
// Allreduce of one stream (WithStream).
func (c *Comm) ReportQualityStream(ctx context.Context, stream uint64, q float64) error {
	c.collMu.Lock()
	l := c.lossy[stream]
	c.collMu.Unlock()
	if l == nil {
		return fmt.Errorf("%w: ReportQuality on stream %d before any loss-tolerant Allreduce on it", ErrConfig, stream)
	}
	return l.red.ReportQuality(ctx, q)
}
