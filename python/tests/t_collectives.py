"""Every method of the multirail backend x every dtype x every op, exact, on
integer-valued data against closed forms; uneven all_to_all_single and
all_to_all; new_group subsets; object collectives; send/recv (any source
too); Work.wait and get_future. Run with 3 ranks (any launcher):

    multirail run -n 3 -- .venv/bin/python python/tests/t_collectives.py
"""

import functools
import time

import _common as C
import torch
import torch.distributed as dist

import multirail

rank, size = C.init()
R = dist.ReduceOp
pg = dist.distributed_c10d._get_default_group()
C.check(isinstance(pg, C.mt.ProcessGroupMultirail), f"the default group is {type(pg)}")
C.check(pg.size() == size and pg.rank() == rank, "pg.size/rank")
C.check(pg.name() == "multirail" and pg.getBackendName() == "multirail", "backend name")

INTS = [torch.uint8, torch.int8, torch.int32, torch.int64]
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
DTYPES = INTS + FLOATS + [torch.bool]
OPS = {"SUM": R.SUM, "PRODUCT": R.PRODUCT, "MIN": R.MIN, "MAX": R.MAX, "AVG": R.AVG, "BAND": R.BAND, "BOR": R.BOR, "BXOR": R.BXOR}
N = 37
BASE = torch.arange(N, dtype=torch.int64) % 5  # 0..4


def data(dt, r, n=N, base=None):
    """Rank r's integer-valued data: base + r (bools: its parity)."""
    b = (BASE if base is None else base) + r
    if dt == torch.bool:
        return (b % 2).bool()
    return b.to(dt)


def expect(dt, op, n=N):
    """The closed form of reducing data(dt, r) over every rank, or None when
    the library must refuse (bitwise on floats, avg on bools)."""
    if dt == torch.bool:
        xs = [(BASE + r) % 2 for r in range(size)]
        f = {"SUM": torch.maximum, "MAX": torch.maximum, "BOR": torch.bitwise_or, "PRODUCT": torch.minimum,
             "MIN": torch.minimum, "BAND": torch.bitwise_and, "BXOR": torch.bitwise_xor}.get(op)
        if f is None:
            return None
        return functools.reduce(f, xs).bool()
    xs = [BASE + r for r in range(size)]
    if op in ("BAND", "BOR", "BXOR"):
        if dt in FLOATS:
            return None
        f = {"BAND": torch.bitwise_and, "BOR": torch.bitwise_or, "BXOR": torch.bitwise_xor}[op]
        return functools.reduce(f, xs).to(dt)
    if op == "SUM":
        return (size * BASE + size * (size - 1) // 2).to(dt)
    if op == "PRODUCT":
        return functools.reduce(torch.mul, xs).to(dt)  # <= 4*5*6 = 120: fits int8
    if op == "MIN":
        return BASE.to(dt)
    if op == "MAX":
        return (BASE + size - 1).to(dt)
    if op == "AVG":  # integers truncate; here the mean is an integer anyway
        return ((size * BASE + size * (size - 1) // 2) // size).to(dt)
    raise AssertionError(op)


def refused(fn, what):
    """fn must raise a multirail.Error (a RuntimeError) at once."""
    try:
        fn()
    except multirail.Error as e:
        C.check(isinstance(e, RuntimeError) and str(e).startswith("multirail"), f"{what}: error {e!r}")
        return
    raise AssertionError(f"rank {rank}: {what}: no error")


t0 = time.monotonic()
counts = {}


def count(m):
    counts[m] = counts.get(m, 0) + 1


# ---- reductions: every dtype x op
for dt in DTYPES:
    for name, op in OPS.items():
        want = expect(dt, name)
        what = f"{dt} {name}"
        if want is None:
            refused(lambda: dist.all_reduce(data(dt, rank), op=op), f"all_reduce {what}")
            continue
        # all_reduce, in place
        t = data(dt, rank)
        dist.all_reduce(t, op=op)
        C.equal(t, want, f"all_reduce {what}")
        count("allreduce")
        # a non-contiguous tensor goes through a copy and back
        t2 = torch.stack([data(dt, rank), data(dt, rank)], 1)[:, 1]
        C.check(not t2.is_contiguous(), "strided view")
        dist.all_reduce(t2, op=op)
        C.equal(t2, want, f"all_reduce strided {what}")
        # reduce to root 1
        t = data(dt, rank)
        dist.reduce(t, dst=1, op=op)
        if rank == 1:
            C.equal(t, want, f"reduce {what}")
        count("reduce")
        # reduce_scatter (list form): block j of rank r is data(r) + j*? -> block j's result is want shifted
        outs = torch.empty(N, dtype=dt)
        ins = [data(dt, rank) for _ in range(size)]
        dist.reduce_scatter(outs, ins, op=op)
        C.equal(outs, want, f"reduce_scatter {what}")
        count("reduce_scatter")
        # _reduce_scatter_base (reduce_scatter_tensor)
        big = torch.cat([data(dt, rank) for _ in range(size)])
        out = torch.empty(N, dtype=dt)
        dist._reduce_scatter_base(out, big, op=op)
        C.equal(out, want, f"_reduce_scatter_base {what}")
        count("_reduce_scatter_base")
        # reduce_scatter_tensor_coalesced (2.x name; called on the group)
        o1, o2 = torch.empty(N, dtype=dt), torch.empty(N, dtype=dt)
        opts = dist.ReduceScatterOptions()
        opts.reduceOp = op
        pg.reduce_scatter_tensor_coalesced([o1, o2], [big, big.clone()], opts).wait()
        C.equal(o1, want, f"reduce_scatter_tensor_coalesced {what}")
        C.equal(o2, want, f"reduce_scatter_tensor_coalesced[1] {what}")
        count("reduce_scatter_tensor_coalesced")
        # all_reduce_coalesced
        a, b = data(dt, rank), data(dt, rank)[:5].clone()
        dist.all_reduce_coalesced([a, b], op=op)
        C.equal(a, want, f"all_reduce_coalesced {what}")
        C.equal(b, want[:5], f"all_reduce_coalesced[1] {what}")
        count("allreduce_coalesced")
        # async: Work.wait and get_future
        t = data(dt, rank)
        w = dist.all_reduce(t, op=op, async_op=True)
        fut = w.get_future()
        got = fut.wait()
        C.check(isinstance(got, list) and got[0] is t, f"future value of all_reduce {what}: {got!r}")
        C.check(w.wait() is True and w.is_completed() and w.is_success(), "Work after the future")
        C.equal(t, want, f"async all_reduce {what}")
    C.log(f"reductions of {dt} ok")

refused(lambda: dist.all_reduce(torch.zeros(3, dtype=torch.int16)), "int16")
if hasattr(dist, "_make_nccl_premul_sum"):
    refused(lambda: dist.all_reduce(torch.ones(3), op=dist._make_nccl_premul_sum(2.0)), "premul_sum")

# ---- data movement: every dtype
for dt in DTYPES:
    mine = data(dt, rank)
    every = [data(dt, r) for r in range(size)]
    # broadcast from 2
    t = mine.clone()
    dist.broadcast(t, src=2)
    C.equal(t, every[2], f"broadcast {dt}")
    count("broadcast")
    # all_gather (list)
    outs = [torch.empty(N, dtype=dt) for _ in range(size)]
    dist.all_gather(outs, mine)
    for r in range(size):
        C.equal(outs[r], every[r], f"all_gather {dt} [{r}]")
    count("allgather")
    # _allgather_base (all_gather_into_tensor)
    out = torch.empty(size * N, dtype=dt)
    dist._all_gather_base(out, mine)
    C.equal(out, torch.cat(every), f"_all_gather_base {dt}")
    count("_allgather_base")
    # allgather_into_tensor_coalesced (2.x name; called on the group)
    o1, o2 = torch.empty(size * N, dtype=dt), torch.empty(size * 3, dtype=dt)
    pg.allgather_into_tensor_coalesced([o1, o2], [mine, mine[:3].clone()]).wait()
    C.equal(o1, torch.cat(every), f"allgather_into_tensor_coalesced {dt}")
    C.equal(o2, torch.cat([e[:3] for e in every]), f"allgather_into_tensor_coalesced[1] {dt}")
    count("allgather_into_tensor_coalesced")
    # all_gather_coalesced
    outl = [[torch.empty(N, dtype=dt), torch.empty(2, dtype=dt)] for _ in range(size)]
    dist.all_gather_coalesced(outl, [mine, mine[:2].clone()])
    for r in range(size):
        C.equal(outl[r][0], every[r], f"all_gather_coalesced {dt} [{r}][0]")
        C.equal(outl[r][1], every[r][:2], f"all_gather_coalesced {dt} [{r}][1]")
    count("allgather_coalesced")
    # gather to 1
    gl = [torch.empty(N, dtype=dt) for _ in range(size)] if rank == 1 else None
    dist.gather(mine, gl, dst=1)
    if rank == 1:
        for r in range(size):
            C.equal(gl[r], every[r], f"gather {dt} [{r}]")
    count("gather")
    # scatter from 0: rank r gets data(r)
    t = torch.empty(N, dtype=dt)
    dist.scatter(t, every if rank == 0 else None, src=0)
    C.equal(t, every[rank], f"scatter {dt}")
    count("scatter")
    # all_to_all_single, even: block j of rank r is data(r) shifted by j
    blocks = [data(dt, rank, base=BASE[:6]) if dt == torch.bool else (BASE[:6] + 10 * rank + j).to(dt) for j in range(size)]
    inp = torch.cat(blocks)
    out = torch.empty_like(inp)
    dist.all_to_all_single(out, inp)
    for j in range(size):
        src_block = data(dt, j, base=BASE[:6]) if dt == torch.bool else (BASE[:6] + 10 * j + rank).to(dt)
        C.equal(out[6 * j : 6 * (j + 1)], src_block, f"all_to_all_single {dt} from {j}")
    count("alltoall_base")
    # all_to_all_single, uneven: rank r sends (r + j + 1) rows of 2 to rank j
    rows_to = [rank + j + 1 for j in range(size)]
    rows_from = [j + rank + 1 for j in range(size)]
    parts = [torch.full((rows_to[j], 2), 10 * rank + j, dtype=torch.int64) for j in range(size)]
    inp = torch.cat(parts).to(dt) if dt != torch.bool else (torch.cat(parts) % 2).bool()
    out = torch.empty((sum(rows_from), 2), dtype=dt)
    dist.all_to_all_single(out, inp, output_split_sizes=rows_from, input_split_sizes=rows_to)
    off = 0
    for j in range(size):
        w = torch.full((rows_from[j], 2), 10 * j + rank, dtype=torch.int64)
        w = w.to(dt) if dt != torch.bool else (w % 2).bool()
        C.equal(out[off : off + rows_from[j]], w, f"uneven all_to_all_single {dt} from {j}")
        off += rows_from[j]
    count("alltoall_base uneven")
    # all_to_all (lists), uneven sizes
    ins = [torch.full((rank + j + 1,), 10 * rank + j, dtype=torch.int64) for j in range(size)]
    ins = [x.to(dt) if dt != torch.bool else (x % 2).bool() for x in ins]
    outs = [torch.empty(j + rank + 1, dtype=dt) for j in range(size)]
    dist.all_to_all(outs, ins)
    for j in range(size):
        w = torch.full((j + rank + 1,), 10 * j + rank, dtype=torch.int64)
        w = w.to(dt) if dt != torch.bool else (w % 2).bool()
        C.equal(outs[j], w, f"all_to_all {dt} from {j}")
    count("alltoall")
    # send/recv in a ring, with a tag
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    got = torch.empty(N, dtype=dt)
    if rank % 2 == 0:
        dist.send(mine, nxt, tag=7)
        dist.recv(got, prv, tag=7)
    else:
        dist.recv(got, prv, tag=7)
        dist.send(mine, nxt, tag=7)
    C.equal(got, every[prv], f"send/recv {dt}")
    count("send/recv")
    C.log(f"data movement of {dt} ok")

# ---- barrier, async p2p, any source, batch_isend_irecv
dist.barrier()
count("barrier")
w = dist.barrier(async_op=True)
C.check(w.wait(), "async barrier")
x = torch.full((4,), float(rank))
if rank == 0:
    seen = set()
    for _ in range(size - 1):
        t = torch.empty(4)
        src = dist.recv(t, tag=11)  # any source (its own tag: the batch below also sends to 0)
        C.check(src in (1, 2) and torch.equal(t, torch.full((4,), float(src))), f"recv any source: {src}, {t}")
        seen.add(src)
    C.check(seen == {1, 2}, f"any-source senders {seen}")
    reqs = [dist.irecv(torch.empty(4), src=r, tag=3) for r in range(1, size)]
    for q in reqs:
        q.wait()
else:
    dist.send(x, 0, tag=11)
    dist.isend(x, 0, tag=3).wait()
count("recv_anysource")
sbuf, rbuf = torch.full((3,), float(rank)), torch.empty(3)
ops = [dist.P2POp(dist.isend, sbuf, (rank + 1) % size), dist.P2POp(dist.irecv, rbuf, (rank - 1) % size)]
for q in dist.batch_isend_irecv(ops):
    q.wait()
C.equal(rbuf, torch.full((3,), float((rank - 1) % size)), "batch_isend_irecv")
count("batch_isend_irecv")

# ---- futures of every kind, then-chains, and a wait with a timeout that passes
t = torch.ones(1000) * rank
futs = [dist.all_reduce(t.clone(), async_op=True).get_future().then(lambda f: f.value()[0].sum().item()) for _ in range(5)]
vals = [f.wait() for f in futs]
C.check(vals == [1000.0 * sum(range(size))] * 5, f"chained futures {vals}")
big = torch.arange(1 << 20, dtype=torch.float32) * (rank + 1)
dist.all_reduce(big)
C.equal(big, torch.arange(1 << 20, dtype=torch.float32) * sum(range(1, size + 1)), "allreduce of 4 MiB")
count("allreduce 4 MiB")

# ---- complex tensors go as their real view (sum)
z = torch.full((5,), complex(rank, -rank), dtype=torch.complex64)
dist.all_reduce(z)
C.equal(z, torch.full((5,), complex(3, -3), dtype=torch.complex64), "complex all_reduce")

# ---- object collectives
objs = [None] * size
dist.all_gather_object(objs, {"rank": rank, "s": "x" * (rank * 100)})
C.check([o["rank"] for o in objs] == list(range(size)) and len(objs[2]["s"]) == 200, "all_gather_object")
lst = [{"a": 1, "b": [1, 2, 3]}, "text"] if rank == 1 else [None, None]
dist.broadcast_object_list(lst, src=1)
C.check(lst == [{"a": 1, "b": [1, 2, 3]}, "text"], f"broadcast_object_list {lst}")
gl = [None] * size if rank == 0 else None
dist.gather_object(("g", rank), gl, dst=0)
if rank == 0:
    C.check(gl == [("g", r) for r in range(size)], f"gather_object {gl}")
out = [None]
dist.scatter_object_list(out, [f"to {r}" for r in range(size)] if rank == 2 else None, src=2)
C.check(out == [f"to {rank}"], f"scatter_object_list {out}")
count("object collectives")

# ---- new_group subsets: [0, 2] (rank 1 outside), and every rank in another order
g02 = dist.new_group([0, 2])
g_all = dist.new_group([2, 1, 0])
if rank in (0, 2):
    C.check(isinstance(g02, C.mt.ProcessGroupMultirail) and g02.size() == 2, f"new_group([0, 2]) is {g02}")
    t = torch.tensor([rank + 1, 10 * (rank + 1)], dtype=torch.int64)
    dist.all_reduce(t, group=g02)
    C.equal(t, torch.tensor([4, 40]), "all_reduce on [0, 2]")
    t = torch.tensor([float(rank)])
    dist.broadcast(t, src=2, group=g02)  # global rank 2
    C.equal(t, torch.tensor([2.0]), "broadcast on [0, 2]")
    outs = [torch.empty(1, dtype=torch.int32) for _ in range(2)]
    dist.all_gather(outs, torch.tensor([rank], dtype=torch.int32), group=g02)
    C.check([int(o) for o in outs] == [0, 2], f"all_gather on [0, 2]: {outs}")
    if rank == 0:
        dist.send(torch.tensor([5.0]), 2, group=g02)
    else:
        t = torch.empty(1)
        dist.recv(t, 0, group=g02)
        C.equal(t, torch.tensor([5.0]), "send/recv on [0, 2]")
    dist.barrier(group=g02)
else:
    C.check(g02 == dist.GroupMember.NON_GROUP_MEMBER, "rank 1 is outside [0, 2]")
t = torch.tensor([1])
dist.all_reduce(t, group=g_all)
C.equal(t, torch.tensor([size]), "all_reduce on new_group(all)")
count("new_group")

# ---- mismatched counts give an error, not a hang
t = torch.ones(10 + rank)
try:
    dist.all_reduce(t)
    mismatch = "no error"
except RuntimeError as e:
    mismatch = str(e)
C.log("mismatched counts:", mismatch[:200])
C.check(mismatch != "no error", "mismatched all_reduce counts raised nothing")
count("mismatch")

elapsed = time.monotonic() - t0
C.log(f"all checks passed in {elapsed:.1f}s: {counts}")
C.done(methods=counts, collective_seconds=round(elapsed, 2))
