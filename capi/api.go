package capi

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/comm"
	"github.com/multirail/multirail/comm/launch"
)

// The functions below are the C ABI's calls (multirail.h), one each, with
// the caller's memory as []byte views (a NULL pointer is nil) and the
// result as an mr_code and a one-line message ("" on success). The shims
// of capi/lib size the views from the arguments with ElemBytes, Mul,
// CommSize and Extent; a view shorter than the call needs is ErrInvalid.

// enter is the start of every call on a communicator: the fork check and
// the handle's lookup.
func enter(name string, h int64) (*commEntry, int32, string) {
	if c, m, bad := forked(); bad {
		return nil, c, m
	}
	return lookup(h, name)
}

// InitEnv is mr_init_env: comm.Init under whatever launcher the
// environment names, configured by configJSON ("" for defaults).
func InitEnv(configJSON string) (h int64, code int32, msg string) {
	defer recovered(&code, &msg)
	if c, m, bad := forked(); bad {
		return 0, c, m
	}
	cfg, err := ParseConfig(configJSON)
	if err != nil {
		c, m := codeAt(err, phaseStart)
		return 0, c, m
	}
	cm, err := comm.Init(context.Background(), cfg)
	if err != nil {
		c, m := codeAt(err, phaseStart)
		return 0, c, m
	}
	return Register(cm), OK, ""
}

// NewToken is mr_new_token: a new random token, NUL-terminated, into buf
// (at least TokenLen bytes).
func NewToken(buf []byte) (code int32, msg string) {
	defer recovered(&code, &msg)
	if c, m, bad := forked(); bad {
		return c, m
	}
	tok := multirail.NewToken()
	if len(buf) < TokenLen || len(buf) < len(tok)+1 {
		return fail(ErrInvalid, "multirail: mr_new_token: a buffer of %d bytes; want at least %d", len(buf), max(TokenLen, len(tok)+1))
	}
	copy(buf, tok)
	buf[len(tok)] = 0
	return OK, ""
}

// pendingEntry is a rank between mr_prepare and mr_connect.
type pendingEntry struct {
	p    *comm.Pending
	size int
}

// Prepare is mr_prepare: rank of size listens and describes itself in a
// card. token ("" for none) overrides configJSON's "token"; with neither,
// MULTIRAIL_TOKEN (or MULTIRAIL_TOKEN_FILE) is used. Empty fields of the
// configuration are filled from the environment as mr_init_env does
// (MULTIRAIL_IFNAME, MULTIRAIL_EMU, ...).
func Prepare(configJSON string, rank, size int32, token string) (p int64, code int32, msg string) {
	defer recovered(&code, &msg)
	if c, m, bad := forked(); bad {
		return 0, c, m
	}
	if size < 1 || rank < 0 || rank >= size {
		return fail2(ErrInvalid, "multirail: mr_prepare: rank %d of size %d; allowed: size >= 1, 0 <= rank < size", rank, size)
	}
	cfg, err := ParseConfig(configJSON)
	if err == nil {
		if token != "" {
			cfg.Transport.Token = token
		}
		cfg, err = comm.ConfigFromEnv(cfg, os.LookupEnv)
	}
	if err != nil {
		c, m := codeAt(err, phaseStart)
		return 0, c, m
	}
	host, _ := os.Hostname()
	pd, err := comm.Prepare(context.Background(), launch.Info{Launcher: "capi", Rank: int(rank), Size: int(size), Host: host}, cfg)
	if err != nil {
		c, m := codeAt(err, phaseStart)
		return 0, c, m
	}
	if n := len(pd.Card()); n > CardMax {
		_ = pd.Close()
		return fail2(ErrInternal, "multirail: mr_prepare: the card has %d bytes, more than MR_CARD_MAX (%d)", n, CardMax)
	}
	p = newHandle()
	tab.Lock()
	tab.pendings[p] = &pendingEntry{p: pd, size: int(size)}
	tab.Unlock()
	return p, OK, ""
}

func lookupPending(p int64, what string) (*pendingEntry, int32, string) {
	if c, m, bad := forked(); bad {
		return nil, c, m
	}
	tab.Lock()
	pe := tab.pendings[p]
	tab.Unlock()
	if pe == nil {
		c, m := fail(ErrInvalid, "multirail: %s: %d is not a pending handle (connected or freed already?)", what, p)
		return nil, c, m
	}
	return pe, OK, ""
}

// PendingSize is the size given to mr_prepare for pending handle p, or a
// negative code (the shim of mr_connect reads that many cards).
func PendingSize(p int64) int64 {
	tab.Lock()
	defer tab.Unlock()
	if pe := tab.pendings[p]; pe != nil {
		return int64(pe.size)
	}
	return int64(ErrInvalid)
}

// PendingCard is mr_pending_card: it returns the card's length and copies
// the card into buf when it fits (nothing is written otherwise).
func PendingCard(p int64, buf []byte) (n int64, code int32, msg string) {
	defer recovered(&code, &msg)
	pe, c, m := lookupPending(p, "mr_pending_card")
	if pe == nil {
		return int64(c), c, m
	}
	card := pe.p.Card()
	if len(buf) >= len(card) {
		copy(buf, card)
	}
	return int64(len(card)), OK, ""
}

// Connect is mr_connect: with every rank's card (by rank) it connects and
// returns the world communicator. The pending handle is used up, whether
// the connection succeeds or not.
func Connect(p int64, cards [][]byte) (h int64, code int32, msg string) {
	defer recovered(&code, &msg)
	pe, c, m := lookupPending(p, "mr_connect")
	if pe == nil {
		return 0, c, m
	}
	if len(cards) != pe.size {
		return fail2(ErrInvalid, "multirail: mr_connect: %d cards for %d ranks", len(cards), pe.size)
	}
	for r, card := range cards {
		if len(card) == 0 {
			return fail2(ErrInvalid, "multirail: mr_connect: the card of rank %d is empty or NULL", r)
		}
	}
	tab.Lock()
	if tab.pendings[p] != pe {
		tab.Unlock()
		return fail2(ErrInvalid, "multirail: mr_connect: pending handle %d was used by another call meanwhile", p)
	}
	delete(tab.pendings, p)
	tab.Unlock()
	cm, err := pe.p.Connect(context.Background(), cards)
	if err != nil {
		_ = pe.p.Close()
		c, m := codeAt(err, phaseStart)
		return 0, c, m
	}
	return Register(cm), OK, ""
}

func fail2(c int32, format string, args ...any) (int64, int32, string) {
	c, m := fail(c, format, args...)
	return 0, c, m
}

// PendingFree is mr_pending_free.
func PendingFree(p int64) (code int32, msg string) {
	defer recovered(&code, &msg)
	if c, m, bad := forked(); bad {
		return c, m
	}
	tab.Lock()
	pe := tab.pendings[p]
	delete(tab.pendings, p)
	tab.Unlock()
	if pe == nil {
		return fail(ErrInvalid, "multirail: mr_pending_free: %d is not a pending handle (connected or freed already?)", p)
	}
	_ = pe.p.Close()
	return OK, ""
}

// CommRank is mr_comm_rank: the rank, or a negative code.
func CommRank(h int64) (r int32) {
	defer func() {
		if recover() != nil {
			r = ErrPanic
		}
	}()
	ce, c, _ := enter("mr_comm_rank", h)
	if ce == nil {
		return c
	}
	return int32(ce.c.Rank())
}

// CommSize is mr_comm_size: the size, or a negative code.
func CommSize(h int64) (n int32) {
	defer func() {
		if recover() != nil {
			n = ErrPanic
		}
	}()
	ce, c, _ := enter("mr_comm_size", h)
	if ce == nil {
		return c
	}
	return int32(ce.c.Size())
}

// Group is mr_comm_group: a communicator of ranks of h (member i is
// ranks[i]), made without communication by the members only.
func Group(h int64, ranks []int32, key string) (g int64, code int32, msg string) {
	defer recovered(&code, &msg)
	ce, c, m := enter("mr_comm_group", h)
	if ce == nil {
		return 0, c, m
	}
	if len(ranks) == 0 {
		return fail2(ErrInvalid, "multirail: mr_comm_group: no ranks (ranks is NULL or n < 1)")
	}
	rs := make([]int, len(ranks))
	for i, r := range ranks {
		rs[i] = int(r)
	}
	gc, err := ce.c.Group(rs, key)
	if err != nil {
		c, m := Code(err)
		return 0, c, m
	}
	return Register(gc), OK, ""
}

// Abort is mr_abort: every rank's pending and later calls fail with
// ErrAborted, and the connections close. The handle stays valid until
// mr_comm_free.
func Abort(h int64, reason string) (code int32, msg string) {
	defer recovered(&code, &msg)
	ce, c, m := enter("mr_abort", h)
	if ce == nil {
		return c, m
	}
	ce.c.Abort(reason)
	return OK, ""
}

// ---- Collectives -------------------------------------------------------

// collective checks the arguments (a) and queues fn: blocking waits for
// it, otherwise its request's handle is returned.
func collective(h int64, name string, block bool, prepare func(ce *commEntry, a *args) func(ctx context.Context) error) (req int64, code int32, msg string) {
	defer recovered(&code, &msg)
	ce, c, m := enter(name, h)
	if ce == nil {
		return 0, c, m
	}
	a := &args{name: name}
	fn := prepare(ce, a)
	if a.err != nil {
		c, m := a.result()
		return 0, c, m
	}
	return ce.submit(block, fn)
}

func nb(name string, block bool) string {
	if block {
		return "mr_" + name
	}
	return "mr_i" + name
}

func blocking(_ int64, c int32, m string) (int32, string) { return c, m }

// Barrier is mr_barrier.
func Barrier(h int64) (int32, string) { return blocking(barrier(h, true)) }

// Ibarrier is mr_ibarrier.
func Ibarrier(h int64) (int64, int32, string) { return barrier(h, false) }

func barrier(h int64, block bool) (int64, int32, string) {
	return collective(h, nb("barrier", block), block, func(ce *commEntry, a *args) func(context.Context) error {
		return func(ctx context.Context) error { return ce.c.Barrier(ctx) }
	})
}

// Bcast is mr_bcast: root's count elements of buf to every rank's buf.
func Bcast(h int64, buf []byte, count int64, dtype, root int32) (int32, string) {
	return blocking(bcast(h, buf, count, dtype, root, true))
}

// Ibcast is mr_ibcast.
func Ibcast(h int64, buf []byte, count int64, dtype, root int32) (int64, int32, string) {
	return bcast(h, buf, count, dtype, root, false)
}

func bcast(h int64, buf []byte, count int64, dtype, root int32, block bool) (int64, int32, string) {
	return collective(h, nb("bcast", block), block, func(ce *commEntry, a *args) func(context.Context) error {
		dt := a.dtype(dtype)
		a.root(root, ce.c.Size())
		b := a.buf("buf", buf, a.bytes("count", count, dt))
		return func(ctx context.Context) error { return comm.BcastBytes(ctx, ce.c, dt, b, int(root)) }
	})
}

// Allreduce is mr_allreduce: send reduced with op into recv on every
// rank; send nil (NULL) or the same address as recv is in place.
func Allreduce(h int64, send, recv []byte, count int64, dtype, op int32) (int32, string) {
	return blocking(allreduce(h, send, recv, count, dtype, op, true))
}

// Iallreduce is mr_iallreduce.
func Iallreduce(h int64, send, recv []byte, count int64, dtype, op int32) (int64, int32, string) {
	return allreduce(h, send, recv, count, dtype, op, false)
}

func allreduce(h int64, send, recv []byte, count int64, dtype, op int32, block bool) (int64, int32, string) {
	return collective(h, nb("allreduce", block), block, func(ce *commEntry, a *args) func(context.Context) error {
		dt, o := a.dtype(dtype), a.op(op)
		a.reduction(dt, op)
		n := a.bytes("count", count, dt)
		r := a.buf("recvbuf", recv, n)
		inPlace := send == nil || same(send, recv)
		var s []byte
		if !inPlace {
			s = a.buf("sendbuf", send, n)
		}
		return func(ctx context.Context) error {
			if !inPlace {
				copy(r, s)
			}
			return comm.AllreduceBytes(ctx, ce.c, dt, r, o)
		}
	})
}

// Reduce is mr_reduce: send reduced with op into root's recv (recv is
// used at root only; there, send nil or the same address as recv is in
// place).
func Reduce(h int64, send, recv []byte, count int64, dtype, op, root int32) (int32, string) {
	return blocking(reduce(h, send, recv, count, dtype, op, root, true))
}

// Ireduce is mr_ireduce.
func Ireduce(h int64, send, recv []byte, count int64, dtype, op, root int32) (int64, int32, string) {
	return reduce(h, send, recv, count, dtype, op, root, false)
}

func reduce(h int64, send, recv []byte, count int64, dtype, op, root int32, block bool) (int64, int32, string) {
	return collective(h, nb("reduce", block), block, func(ce *commEntry, a *args) func(context.Context) error {
		dt, o := a.dtype(dtype), a.op(op)
		a.root(root, ce.c.Size())
		a.reduction(dt, op)
		n := a.bytes("count", count, dt)
		atRoot := int(root) == ce.c.Rank()
		var s, r []byte
		inPlace := false
		if atRoot {
			r = a.buf("recvbuf", recv, n)
			inPlace = send == nil || same(send, recv)
		}
		if !inPlace {
			s = a.buf("sendbuf", send, n)
		}
		return func(ctx context.Context) error {
			if inPlace || dt == comm.Bool {
				// in place, or bools, which comm makes 0/1 in place: the
				// caller's sendbuf is const
				s = append([]byte(nil), cond(inPlace, r, s)...)
			}
			return comm.ReduceBytes(ctx, ce.c, dt, s, r, o, int(root))
		}
	})
}

// Allgather is mr_allgather: every rank's count elements of send, in rank
// order, into every rank's recv (Size()*count elements).
func Allgather(h int64, send, recv []byte, count int64, dtype int32) (int32, string) {
	return blocking(allgather(h, send, recv, count, dtype, true))
}

// Iallgather is mr_iallgather.
func Iallgather(h int64, send, recv []byte, count int64, dtype int32) (int64, int32, string) {
	return allgather(h, send, recv, count, dtype, false)
}

func allgather(h int64, send, recv []byte, count int64, dtype int32, block bool) (int64, int32, string) {
	return collective(h, nb("allgather", block), block, func(ce *commEntry, a *args) func(context.Context) error {
		dt := a.dtype(dtype)
		n := a.bytes("count", count, dt)
		s := a.buf("sendbuf", send, n)
		r := a.buf("recvbuf", recv, a.bytes("size*count", Mul(count, int64(ce.c.Size())), dt))
		return func(ctx context.Context) error { return comm.AllgatherBytes(ctx, ce.c, dt, s, r) }
	})
}

// ReduceScatter is mr_reduce_scatter: send (Size()*recvcount elements)
// reduced with op; rank i receives block i (recvcount elements).
func ReduceScatter(h int64, send, recv []byte, recvcount int64, dtype, op int32) (int32, string) {
	return blocking(reduceScatter(h, send, recv, recvcount, dtype, op, true))
}

// IreduceScatter is mr_ireduce_scatter.
func IreduceScatter(h int64, send, recv []byte, recvcount int64, dtype, op int32) (int64, int32, string) {
	return reduceScatter(h, send, recv, recvcount, dtype, op, false)
}

func reduceScatter(h int64, send, recv []byte, recvcount int64, dtype, op int32, block bool) (int64, int32, string) {
	return collective(h, nb("reduce_scatter", block), block, func(ce *commEntry, a *args) func(context.Context) error {
		dt, o := a.dtype(dtype), a.op(op)
		a.reduction(dt, op)
		r := a.buf("recvbuf", recv, a.bytes("recvcount", recvcount, dt))
		s := a.buf("sendbuf", send, a.bytes("size*recvcount", Mul(recvcount, int64(ce.c.Size())), dt))
		return func(ctx context.Context) error {
			if dt == comm.Bool {
				s = append([]byte(nil), s...) // comm makes bools 0/1 in place; sendbuf is const
			}
			return comm.ReduceScatterBytes(ctx, ce.c, dt, s, r, o)
		}
	})
}

// Alltoall is mr_alltoall: block j (count elements) of send to rank j,
// whose block i of recv it becomes.
func Alltoall(h int64, send, recv []byte, count int64, dtype int32) (int32, string) {
	return blocking(alltoall(h, send, recv, count, dtype, true))
}

// Ialltoall is mr_ialltoall.
func Ialltoall(h int64, send, recv []byte, count int64, dtype int32) (int64, int32, string) {
	return alltoall(h, send, recv, count, dtype, false)
}

func alltoall(h int64, send, recv []byte, count int64, dtype int32, block bool) (int64, int32, string) {
	return collective(h, nb("alltoall", block), block, func(ce *commEntry, a *args) func(context.Context) error {
		dt := a.dtype(dtype)
		n := a.bytes("size*count", Mul(count, int64(ce.c.Size())), dt)
		s := a.buf("sendbuf", send, n)
		r := a.buf("recvbuf", recv, n)
		return func(ctx context.Context) error { return comm.AlltoallBytes(ctx, ce.c, dt, s, r) }
	})
}

// Alltoallv is mr_alltoallv: counts and displacements in elements, Size()
// entries each.
func Alltoallv(h int64, send []byte, sendCounts, sendDispls []int64, recv []byte, recvCounts, recvDispls []int64, dtype int32) (int32, string) {
	return blocking(alltoallv(h, send, sendCounts, sendDispls, recv, recvCounts, recvDispls, dtype, true))
}

// Ialltoallv is mr_ialltoallv.
func Ialltoallv(h int64, send []byte, sendCounts, sendDispls []int64, recv []byte, recvCounts, recvDispls []int64, dtype int32) (int64, int32, string) {
	return alltoallv(h, send, sendCounts, sendDispls, recv, recvCounts, recvDispls, dtype, false)
}

func alltoallv(h int64, send []byte, sendCounts, sendDispls []int64, recv []byte, recvCounts, recvDispls []int64, dtype int32, block bool) (int64, int32, string) {
	return collective(h, nb("alltoallv", block), block, func(ce *commEntry, a *args) func(context.Context) error {
		dt := a.dtype(dtype)
		size := ce.c.Size()
		for _, v := range []struct {
			name string
			a    []int64
		}{{"sendcounts", sendCounts}, {"sdispls", sendDispls}, {"recvcounts", recvCounts}, {"rdispls", recvDispls}} {
			a.check(len(v.a) == size, "%s has %d entries (NULL: 0); want one per rank (%d)", v.name, len(v.a), size)
		}
		var s, r []byte
		if a.err == nil {
			sn, rn := Extent(sendCounts, sendDispls, int64(dt.Size())), Extent(recvCounts, recvDispls, int64(dt.Size()))
			a.check(sn >= 0, "sendcounts and sdispls must be >= 0 (and fit in memory)")
			a.check(rn >= 0, "recvcounts and rdispls must be >= 0 (and fit in memory)")
			s = a.buf("sendbuf", send, int(max(sn, 0)))
			r = a.buf("recvbuf", recv, int(max(rn, 0)))
		}
		sc, sd, rc, rd := ints(sendCounts), ints(sendDispls), ints(recvCounts), ints(recvDispls)
		return func(ctx context.Context) error {
			return comm.AlltoallvBytes(ctx, ce.c, dt, s, sc, sd, r, rc, rd)
		}
	})
}

// Gather is mr_gather: every rank's count elements of send into root's
// recv (Size()*count elements, in rank order; used at root only).
func Gather(h int64, send, recv []byte, count int64, dtype, root int32) (int32, string) {
	return blocking(gather(h, send, recv, count, dtype, root, true))
}

// Igather is mr_igather.
func Igather(h int64, send, recv []byte, count int64, dtype, root int32) (int64, int32, string) {
	return gather(h, send, recv, count, dtype, root, false)
}

func gather(h int64, send, recv []byte, count int64, dtype, root int32, block bool) (int64, int32, string) {
	return collective(h, nb("gather", block), block, func(ce *commEntry, a *args) func(context.Context) error {
		dt := a.dtype(dtype)
		a.root(root, ce.c.Size())
		s := a.buf("sendbuf", send, a.bytes("count", count, dt))
		var r []byte
		if int(root) == ce.c.Rank() {
			r = a.buf("recvbuf", recv, a.bytes("size*count", Mul(count, int64(ce.c.Size())), dt))
		}
		return func(ctx context.Context) error { return comm.GatherBytes(ctx, ce.c, dt, s, r, int(root)) }
	})
}

// Scatter is mr_scatter: block i (count elements) of root's send
// (Size()*count elements; used at root only) to rank i's recv.
func Scatter(h int64, send, recv []byte, count int64, dtype, root int32) (int32, string) {
	return blocking(scatter(h, send, recv, count, dtype, root, true))
}

// Iscatter is mr_iscatter.
func Iscatter(h int64, send, recv []byte, count int64, dtype, root int32) (int64, int32, string) {
	return scatter(h, send, recv, count, dtype, root, false)
}

func scatter(h int64, send, recv []byte, count int64, dtype, root int32, block bool) (int64, int32, string) {
	return collective(h, nb("scatter", block), block, func(ce *commEntry, a *args) func(context.Context) error {
		dt := a.dtype(dtype)
		a.root(root, ce.c.Size())
		r := a.buf("recvbuf", recv, a.bytes("count", count, dt))
		var s []byte
		if int(root) == ce.c.Rank() {
			s = a.buf("sendbuf", send, a.bytes("size*count", Mul(count, int64(ce.c.Size())), dt))
		}
		return func(ctx context.Context) error { return comm.ScatterBytes(ctx, ce.c, dt, s, r, int(root)) }
	})
}

// ---- Loss-tolerant allreduce -------------------------------------------

// LossyAllreduce is mr_lossy_allreduce: count float32s of buf (4*count
// bytes), op MR_SUM or MR_AVG, in place, with the state of stream.
func LossyAllreduce(h int64, buf []byte, count int64, op int32, stream int64, optsJSON string) (int32, string) {
	return blocking(lossyAllreduce(h, buf, count, op, stream, optsJSON, true))
}

// IlossyAllreduce is mr_ilossy_allreduce.
func IlossyAllreduce(h int64, buf []byte, count int64, op int32, stream int64, optsJSON string) (int64, int32, string) {
	return lossyAllreduce(h, buf, count, op, stream, optsJSON, false)
}

func lossyAllreduce(h int64, buf []byte, count int64, op int32, stream int64, optsJSON string, block bool) (int64, int32, string) {
	return collective(h, nb("lossy_allreduce", block), block, func(ce *commEntry, a *args) func(context.Context) error {
		o := a.op(op)
		a.check(a.err != nil || o == comm.Sum || o == comm.Mean, "op %s; allowed: MR_SUM or MR_AVG", opName(op))
		b := a.buf("buf", buf, a.bytes("count", count, comm.Float32))
		rc, err := ParseLossyOpts(optsJSON)
		if err != nil && a.err == nil {
			a.err = fmt.Errorf("%w: %s: %s", errArg, a.name, strings.TrimPrefix(err.Error(), comm.ErrConfig.Error()+": "))
		}
		return func(ctx context.Context) error {
			return comm.AllreduceBytes(ctx, ce.c, comm.Float32, b, o, comm.LossTolerant(rc), comm.WithStream(uint64(stream)))
		}
	})
}

func cond[T any](c bool, a, b T) T {
	if c {
		return a
	}
	return b
}

func opName(op int32) string {
	if op >= 0 && op < NumOps {
		return opNames[op]
	}
	return fmt.Sprint(op)
}

// LossyReport is mr_lossy_report: the quality of stream's last
// loss-tolerant result, reported after the collectives called before it
// (it runs on the executor, in call order).
func LossyReport(h int64, stream int64, quality float64) (int32, string) {
	return blocking(collective(h, "mr_lossy_report", true, func(ce *commEntry, a *args) func(context.Context) error {
		return func(ctx context.Context) error { return ce.c.ReportQualityStream(ctx, uint64(stream), quality) }
	}))
}

// LossyStats is mr_lossy_stats (mr_lossy_stats_t's fields).
type LossyStats struct {
	Packets, Discarded, Received, Missing int64
}

// GetLossyStats is mr_lossy_stats: the counters of stream's loss-tolerant
// calls on this rank (zero before the first).
func GetLossyStats(h int64, stream int64) (st LossyStats, code int32, msg string) {
	defer recovered(&code, &msg)
	ce, c, m := enter("mr_lossy_stats", h)
	if ce == nil {
		return st, c, m
	}
	rs := ce.c.LossyStatsStream(uint64(stream))
	return LossyStats{Packets: int64(rs.PacketsSent), Discarded: int64(rs.PacketsDropped), Received: int64(rs.PacketsReceived), Missing: int64(rs.PacketsMissing)}, OK, ""
}

// ---- Point to point ----------------------------------------------------

func checkTag(a *args, tag int32, any bool) {
	a.check(tag >= 0 && tag <= MaxTag || any && tag == AnyTag, "tag %d; allowed: 0..%d (MR_MAX_TAG)%s", tag, MaxTag, map[bool]string{true: " or MR_ANY_TAG (-1)"}[any])
}

// Send is mr_send: buf to rank dst with tag.
func Send(h int64, buf []byte, dst, tag int32) (code int32, msg string) {
	defer recovered(&code, &msg)
	ce, c, m := enter("mr_send", h)
	if ce == nil {
		return c, m
	}
	a := &args{name: "mr_send"}
	checkTag(a, tag, false)
	if a.err != nil {
		return a.result()
	}
	return ce.code(ce.c.Send(ce.ctx, int(dst), int(tag), buf))
}

// Recv is mr_recv: a message from src (or AnySource) with tag (or AnyTag)
// into buf. A larger message is ErrTrunc (nothing copied; st.Bytes is its
// length).
func Recv(h int64, buf []byte, src, tag int32) (st Status, code int32, msg string) {
	defer recovered(&code, &msg)
	ce, c, m := enter("mr_recv", h)
	if ce == nil {
		return st, c, m
	}
	a := &args{name: "mr_recv"}
	checkTag(a, tag, true)
	if a.err != nil {
		c, m := a.result()
		return st, c, m
	}
	s, err := ce.c.RecvInto(ce.ctx, int(src), int(tag), buf)
	st = Status{Source: int32(s.Source), Tag: int32(s.Tag), Bytes: int64(s.Len)}
	c, m = ce.code(err)
	return st, c, m
}

// Isend is mr_isend: buf is read in place until the request finishes.
func Isend(h int64, buf []byte, dst, tag int32) (req int64, code int32, msg string) {
	defer recovered(&code, &msg)
	ce, c, m := enter("mr_isend", h)
	if ce == nil {
		return 0, c, m
	}
	a := &args{name: "mr_isend"}
	checkTag(a, tag, false)
	if a.err != nil {
		c, m := a.result()
		return 0, c, m
	}
	rq, c, m := ce.start(true, true)
	if rq == nil {
		return 0, c, m
	}
	cr := ce.c.Isend(ce.ctx, int(dst), int(tag), buf)
	go func() {
		defer ce.p2p.Done()
		<-cr.Done()
		_, _, err := cr.Test()
		c, m := ce.code(err)
		rq.finish(c, m, Status{})
	}()
	return rq.id, OK, ""
}

// Irecv is mr_irecv: the message is copied into buf when it arrives (a
// larger one is ErrTrunc, nothing copied, Status.Bytes its length).
func Irecv(h int64, buf []byte, src, tag int32) (req int64, code int32, msg string) {
	defer recovered(&code, &msg)
	ce, c, m := enter("mr_irecv", h)
	if ce == nil {
		return 0, c, m
	}
	a := &args{name: "mr_irecv"}
	checkTag(a, tag, true)
	if a.err != nil {
		c, m := a.result()
		return 0, c, m
	}
	rq, c, m := ce.start(true, true)
	if rq == nil {
		return 0, c, m
	}
	ctx, cancel := context.WithCancel(ce.ctx)
	cr := ce.c.Irecv(ctx, int(src), int(tag))
	// mr_request_free withdraws the receive before it returns: a message
	// sent after it must go to the next receive (cancelling ctx alone
	// withdraws it a moment later, from another goroutine, and a message
	// arriving meanwhile was the freed request's, lost).
	rq.stop = func() {
		cr.Cancel()
		cancel()
	}
	go func() {
		defer ce.p2p.Done()
		defer cancel()
		<-cr.Done()
		c, m, st := irecvDone(ce, cr, buf)
		rq.finish(c, m, st)
	}()
	return rq.id, OK, ""
}

func irecvDone(ce *commEntry, cr *comm.Request, buf []byte) (c int32, m string, st Status) {
	defer recovered(&c, &m)
	msg, _, err := cr.Test()
	if err != nil {
		c, m := ce.code(err)
		return c, m, st
	}
	st = Status{Source: int32(msg.Source), Tag: int32(msg.Tag), Bytes: int64(len(msg.Data))}
	if len(msg.Data) > len(buf) {
		c, m := fail(ErrTrunc, "multirail: mr_irecv: %d bytes from rank %d (tag %d) into a buffer of %d", len(msg.Data), msg.Source, msg.Tag, len(buf))
		return c, m, st
	}
	copy(buf, msg.Data)
	return OK, "", st
}
