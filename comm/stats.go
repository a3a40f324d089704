package comm

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	"github.com/multirail/multirail"
)

// Stats is a snapshot of a communicator's telemetry.
type Stats struct {
	Rank, Size int
	Launcher   string
	// Peers has one entry per rank of the communicator (this rank's has
	// no connection).
	Peers []PeerStats
	// Collectives counts the collective calls made on this communicator,
	// by collective and algorithm.
	Collectives []CollStats
}

// PeerStats describes the connection to one rank.
type PeerStats struct {
	Rank int    // in the communicator
	Host string // the host name it reported
	// Rails are the rails of the connection (none for this rank).
	Rails []RailInfo
	// Held is the bytes of its messages held unmatched (with overhead).
	Held int64
	// Err is why the connection ended, "" while it runs.
	Err string
	// Conn is the connection's telemetry (per rail bytes, segments,
	// scheduler); nil for this rank.
	Conn *multirail.Stats
}

// CollStats counts one collective's calls with one algorithm.
type CollStats struct {
	Collective string
	Algo       string
	Calls      uint64
	Failed     uint64
	Bytes      int64         // element bytes passed by this rank (count x size), summed
	Time       time.Duration // summed duration of the calls
}

type collStatKey struct {
	cl   Collective
	algo Algo
}

type collStats struct {
	mu sync.Mutex
	m  map[collStatKey]*CollStats
}

func (c *Comm) stats() *collStats { return &c.cstats }

func (c *Comm) recordColl(cl Collective, a Algo, bytes int, d time.Duration, err error) {
	s := c.stats()
	s.mu.Lock()
	defer s.mu.Unlock()
	k := collStatKey{cl, a}
	e := s.m[k]
	if s.m == nil {
		s.m = make(map[collStatKey]*CollStats)
	}
	if e == nil {
		e = &CollStats{Collective: cl.String(), Algo: a.String()}
		s.m[k] = e
	}
	e.Calls++
	if err != nil {
		e.Failed++
	}
	e.Bytes += int64(bytes)
	e.Time += d
}

// Stats returns a snapshot of the communicator's telemetry.
func (c *Comm) Stats() Stats {
	w := c.w
	st := Stats{Rank: c.rank, Size: len(c.ranks), Launcher: w.launcher}
	for i, wr := range c.ranks {
		ps := PeerStats{Rank: i}
		if p := w.peers[wr]; p != nil {
			ps.Host = p.host
			ps.Rails = slices.Clone(p.rails)
			w.mu.Lock()
			ps.Held = p.held
			if p.err != nil {
				ps.Err = p.err.Error()
			}
			w.mu.Unlock()
			cs := p.conn.Stats()
			ps.Conn = &cs
		} else {
			ps.Host = w.host
		}
		st.Peers = append(st.Peers, ps)
	}
	s := c.stats()
	s.mu.Lock()
	for _, e := range s.m {
		st.Collectives = append(st.Collectives, *e)
	}
	s.mu.Unlock()
	slices.SortFunc(st.Collectives, func(a, b CollStats) int {
		if a.Collective != b.Collective {
			if a.Collective < b.Collective {
				return -1
			}
			return 1
		}
		if a.Algo < b.Algo {
			return -1
		}
		if a.Algo > b.Algo {
			return 1
		}
		return 0
	})
	return st
}

// Undefined as a color makes Split return no communicator for this rank.
const Undefined = -1

// Split partitions the communicator: ranks that pass the same color
// (>= 0) form a new communicator, ranked by key and then by their rank
// here; a rank passing Undefined takes part but gets nil. Every rank
// must call it (it is a collective). The new communicator shares this
// one's connections; Close it when done.
func (c *Comm) Split(ctx context.Context, color, key int) (*Comm, error) {
	if color < Undefined {
		return nil, fmt.Errorf("%w: split: color %d; allowed: >= 0 or Undefined (-1)", ErrConfig, color)
	}
	w := c.w
	w.mu.Lock()
	next := w.nextID
	w.mu.Unlock()
	n := len(c.ranks)
	all := make([]int64, 3*n)
	if err := Allgather(ctx, c, []int64{int64(color), int64(key), int64(next)}, all); err != nil {
		return nil, err
	}
	id := uint64(0)
	type member struct{ key, rank int }
	var members []member
	for r := range n {
		id = max(id, uint64(all[3*r+2]))
		if int(all[3*r]) == color {
			members = append(members, member{int(all[3*r+1]), r})
		}
	}
	w.mu.Lock()
	w.nextID = max(w.nextID, id+1)
	w.mu.Unlock()
	if color == Undefined {
		return nil, nil
	}
	slices.SortStableFunc(members, func(a, b member) int {
		if a.key != b.key {
			return a.key - b.key
		}
		return a.rank - b.rank
	})
	ranks := make([]int, len(members))
	for i, m := range members {
		ranks[i] = c.ranks[m.rank]
	}
	return w.newComm(id, ranks), nil
}

// Group returns a communicator of some of c's ranks, made without any
// communication: only the members call it, each with the same ranks (c's
// ranks of the members; member i of the new communicator is ranks[i]) and
// the same key, which tells apart groups of the same members (torch's
// group name, say). It is how torch.distributed creates a group: the
// backend is asked for it only on its members. The new communicator
// shares c's connections; Close it when done. Its context id is a hash of
// c's, key and ranks: a second live group with the same id fails with
// ErrConfig (close the first, or pick another key).
func (c *Comm) Group(ranks []int, key string) (*Comm, error) {
	if len(ranks) == 0 {
		return nil, fmt.Errorf("%w: group: no ranks; allowed: a non-empty list of distinct ranks 0..%d including this rank", ErrConfig, len(c.ranks)-1)
	}
	seen := make(map[int]bool, len(ranks))
	world := make([]int, len(ranks))
	me := false
	for i, r := range ranks {
		if err := c.checkRank(r, "group", false); err != nil {
			return nil, err
		}
		if seen[r] {
			return nil, fmt.Errorf("%w: group: rank %d listed twice; allowed: distinct ranks", ErrConfig, r)
		}
		seen[r] = true
		me = me || r == c.rank
		world[i] = c.ranks[r]
	}
	if !me {
		return nil, fmt.Errorf("%w: group: this rank (%d) is not among %v; only members create a group", ErrConfig, c.rank, ranks)
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%d|%s|%v", c.id, key, world)
	id := groupIDBit | h.Sum64()&(groupIDBit-1)
	w := c.w
	w.mu.Lock()
	cs := w.ctxs[id]
	live := cs != nil && cs.comm != nil
	closed := w.closed
	w.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if live {
		return nil, fmt.Errorf("%w: group: a group of ranks %v with key %q is open already; close it or pick another key", ErrConfig, ranks, key)
	}
	return w.newComm(id, world), nil
}

// groupIDBit marks the context ids of Group, apart from Split's counter.
const groupIDBit = 1 << 62
