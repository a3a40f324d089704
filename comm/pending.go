package comm

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/comm/launch"
	tokens "github.com/multirail/multirail/internal/token"
)

// Pending is one rank between Prepare and Connect: it listens, and its
// Card describes how the other ranks reach it. Programs that already have
// a way to exchange small blobs between ranks (MPI_Allgather, torch's
// key-value store, a shared file) start a communicator in two steps, as
// NCCL's ncclGetUniqueId/ncclCommInitRank: every rank calls Prepare, the
// program gives every rank every rank's card, every rank calls Connect.
type Pending struct {
	b    *boot
	card []byte

	mu   sync.Mutex
	used bool
}

// Prepare starts rank info.Rank of info.Size ranks without a rendezvous:
// it listens on every interface and returns the rank's card (Card). Only
// info.Rank, info.Size and, if known, info.Host, info.LocalRank,
// info.LocalSize and info.Launcher are used. Every rank must use the same
// token (cfg.Transport.Token, else MULTIRAIL_TOKEN or
// MULTIRAIL_TOKEN_FILE): one rank draws it (multirail.NewToken) and the
// program shares it with the cards; without one a job of more than one
// rank is refused unless cfg.Transport.Insecure. Close a Pending that will
// not Connect.
func Prepare(ctx context.Context, info launch.Info, cfg Config) (*Pending, error) {
	c, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	if info.Size < 1 || info.Rank < 0 || info.Rank >= info.Size {
		return nil, fmt.Errorf("%w: rank %d of size %d; allowed: size >= 1, 0 <= rank < size", ErrConfig, info.Rank, info.Size)
	}
	if info.Launcher == "" {
		info.Launcher = "cards"
	}
	if info.LocalSize == 0 {
		info.LocalRank, info.LocalSize = launch.Unknown, launch.Unknown
	}
	info.Rdzv, info.Serve = "", false
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b := &boot{info: info, cfg: c, log: c.Logger.With("rank", info.Rank)}
	card, err := b.prepare()
	if err == nil && b.tcfg.Token == "" && info.Size > 1 && !b.tcfg.Insecure {
		err = fmt.Errorf("%w: no token for a job of %d ranks: set Config.Transport.Token (one rank draws it with multirail.NewToken and shares it with the cards) or MULTIRAIL_TOKEN", ErrConfig, info.Size)
	}
	if err != nil {
		b.cleanup()
		return nil, fmt.Errorf("%w: rank %d: %w", ErrBootstrap, info.Rank, err)
	}
	return &Pending{b: b, card: card}, nil
}

// Card returns this rank's card: a small JSON object (addresses, port,
// host identity) that every other rank's Connect needs. It holds no
// secret.
func (p *Pending) Card() []byte { return append([]byte(nil), p.card...) }

// ErrUsed is returned by a second Connect or a Connect after Close.
var ErrUsed = errors.New("comm: pending rank already connected or closed")

// Connect connects to every other rank, given every rank's card indexed
// by rank (this rank's own included), and returns the world communicator
// once every rank is connected (bounded by Config.Timeout). A Pending
// connects once; after a failure it is closed.
func (p *Pending) Connect(ctx context.Context, cards [][]byte) (*Comm, error) {
	p.mu.Lock()
	if p.used {
		p.mu.Unlock()
		return nil, ErrUsed
	}
	p.used = true
	p.mu.Unlock()
	b := p.b
	bctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	c, err := b.finish(bctx, cards)
	if err != nil {
		b.cleanup()
		if ctx.Err() == nil && bctx.Err() != nil && !errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w (after the %v timeout)", err, b.cfg.Timeout)
		}
		return nil, fmt.Errorf("%w: rank %d: %w", ErrBootstrap, b.info.Rank, err)
	}
	return c, nil
}

// Close releases a Pending that did not connect (its listener and
// emulated rails); after a Connect it does nothing.
func (p *Pending) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.used {
		p.used = true
		p.b.cleanup()
	}
	return nil
}

// Store is a key-value store that every rank of a job reaches, such as
// torch.distributed's c10d store: StartStore meets the other ranks
// through it. Get waits until the key is set (or ctx ends).
type Store interface {
	Set(ctx context.Context, key string, value []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
}

// Keys StartStore uses in its store.
const (
	StoreTokenKey = "multirail/token" // the job's token, when rank 0 draws it
	StoreCardKey  = "multirail/card/" // + rank: each rank's card
)

// StartStore starts rank of size through store: each rank publishes its
// card under StoreCardKey+rank and reads the others'. The token is
// cfg.Transport.Token or MULTIRAIL_TOKEN where set; otherwise rank 0 draws
// one and puts it under StoreTokenKey, where the others read it. Whoever
// can read the store can then join the job: the store is the trust
// boundary (torch's TCPStore is unauthenticated: anyone who reaches
// MASTER_ADDR:MASTER_PORT reads it), so set MULTIRAIL_TOKEN on networks
// you do not trust.
func StartStore(ctx context.Context, store Store, rank, size int, cfg Config) (*Comm, error) {
	if size < 1 || rank < 0 || rank >= size {
		return nil, fmt.Errorf("%w: rank %d of size %d; allowed: size >= 1, 0 <= rank < size", ErrConfig, rank, size)
	}
	if cfg.Transport.Token == "" && !envTokenSet() && size > 1 {
		if rank == 0 {
			tok := multirail.NewToken()
			if err := store.Set(ctx, StoreTokenKey, []byte(tok)); err != nil {
				return nil, fmt.Errorf("%w: store: set %s: %w", ErrBootstrap, StoreTokenKey, err)
			}
			cfg.Transport.Token = tok
		} else {
			tok, err := store.Get(ctx, StoreTokenKey)
			if err != nil {
				return nil, fmt.Errorf("%w: store: get %s: %w", ErrBootstrap, StoreTokenKey, err)
			}
			cfg.Transport.Token = string(tok)
		}
	}
	p, err := Prepare(ctx, launch.Info{Launcher: "store", Rank: rank, Size: size}, cfg)
	if err != nil {
		return nil, err
	}
	if err := store.Set(ctx, StoreCardKey+strconv.Itoa(rank), p.Card()); err != nil {
		_ = p.Close()
		return nil, fmt.Errorf("%w: store: set %s%d: %w", ErrBootstrap, StoreCardKey, rank, err)
	}
	cards := make([][]byte, size)
	for r := range size {
		if cards[r], err = store.Get(ctx, StoreCardKey+strconv.Itoa(r)); err != nil {
			_ = p.Close()
			return nil, fmt.Errorf("%w: store: get %s%d: %w", ErrBootstrap, StoreCardKey, r, err)
		}
	}
	return p.Connect(ctx, cards)
}

// envTokenSet reports whether the environment gives a token
// (MULTIRAIL_TOKEN or MULTIRAIL_TOKEN_FILE).
func envTokenSet() bool {
	t, err := tokens.Resolve("")
	return err != nil || t != "" // a bad token file is reported by Prepare
}
