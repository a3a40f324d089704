"""gloo_osu.py - OSU-style benchmarks for PyTorch's torch.distributed with
the gloo backend (or, with --backend multirail, multirail's backend for
torch), measured exactly as `multirail osu` measures its
communicator (comm/osu: tests.go, run.go, report.go) and as mrosu
(lab/mpi/src/mrosu.c) measures Open MPI, so that Gloo's numbers can be set
beside theirs. multirail's lab bench embeds it (lab/labbench/gloo.go) and
runs it under torchrun, one process per host.

  torchrun ... gloo_osu.py [--validate] [--backend gloo|multirail] TEST SIZES [ITERS [WARMUP]]
  python3 gloo_osu.py --plan TEST SIZES [ITERS [WARMUP]]

Every process is one rank of the default process group (env://, as torchrun
sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT), backend gloo (the
default; GLOO_SOCKET_IFNAME says which NICs) or multirail (`import
multirail.torch` registers it; MULTIRAIL_IFNAME, MULTIRAIL_PLAINTEXT and the
communicator's other variables apply). TEST is
one of
  latency         after a barrier of every rank, ranks 0 and 1 ping-pong
                  SIZE bytes (dist.send, dist.recv; the others wait); each
                  round trip is timed, latency = time / (2 x iterations);
                  min/max are the fastest and slowest round trip halved
  bw              rank 0 posts a window of 64 dist.isend of SIZE bytes to
                  rank 1, which posts 64 dist.irecv and answers the window
                  with a 4-byte ack; rank 0 times each window from the first
                  send to the ack. avg_us is the time per message, min/max
                  the fastest and slowest window / 64, mb_s the payload over
                  the timed windows' time (MB = 10^6 B)
  bibw            ranks 0 and 1 both post 64 receives and 64 sends at once
                  and wait for all; mb_s counts both directions
  barrier (dist.barrier), bcast (int32, root 0, dist.broadcast), allreduce
  (float32 sum, dist.all_reduce in place, the input copied in untimed before
  each call as `multirail osu` does), allgather (int32, SIZE per rank,
  dist.all_gather into views of one buffer), reduce-scatter (float32 sum,
  SIZE the whole vector, block r of it on rank r as
  comm.ReduceScatterCounts cuts it, dist.reduce_scatter), alltoall (int32,
  SIZE the block each pair exchanges, dist.all_to_all_single)
                  every rank; a barrier, then WARMUP+ITERS calls, each timed
                  alone with a barrier after it (none after a barrier); each
                  rank averages its timed calls; rank 0 reports the
                  min/avg/max over the ranks of those averages and
                  nccl-tests' bus bandwidth in bits/s: AlgBytes x 8 / avg x
                  BusFactor(n), AlgBytes n x SIZE for allgather and alltoall
                  and SIZE otherwise, BusFactor 2(n-1)/n (allreduce), (n-1)/n
                  (allgather, reduce-scatter, alltoall), 1 (bcast), 0 (barrier)

Point-to-point messages use tag 0, torch's default. SIZES, ITERS, WARMUP and
--validate are mrosu's (sizes 1..64 MiB or MIN:MAX ranges, bw and bibw up to
16 MiB, a collective's sizes rounded down to whole 4-byte elements, the
barrier one size 0; iterations 0 or absent for the defaults by size of
comm/osu DefaultIters). --plan prints the sizes and iterations without
torch: "PLAN TEST SIZE ITERS WARMUP" lines.

Rank 0 prints, on stdout, header lines starting with '#' and one line per
size, as mrosu does:
  MROSU TEST RANKS SIZE AVG_US MIN_US MAX_US BUSBW_BPS MB_S ITERS WARMUP
each after a line "# gloo_osu: busy SIZE SHARE RANKS": the machine's busy
CPU share while that size ran (from /proc/stat, user+nice+system+irq+softirq
of all CPUs over wall time x CPUs; -1 where /proc/stat cannot be read) and
the share the ranks' own processes used (every rank's user+system time,
all its threads, summed over the ranks, over rank 0's wall time x CPUs).
Errors are one line on stderr starting "gloo_osu: ". Exit status: 2 for bad
arguments (rank 0 says why), 3 for a test this torch's backend cannot run
(every rank fails its first call alike; rank 0 says why), 4 when torch (or
the backend) cannot be imported, 1 for a validation failure or any other
error.
"""

import datetime
import faulthandler
import os
import re
import signal
import socket
import sys
import time

# Limits and defaults, as comm/osu/tests.go has them.
MIN_SIZE = 1
MAX_SIZE = 64 << 20
MAX_BW_SIZE = 16 << 20
WINDOW = 64
BW_BUDGET = 128 << 20
SMALL_SIZE = 8 << 10
LARGE_SIZE = 1 << 20
MAX_ITERS = 1000000

# What every rank contributes to a size's row: avg, min, max, bytes, secs,
# first bad element (-1 if none), CPU seconds the process used.
GATHERED = 7

# How long one gloo call (and the rendezvous) may take, in seconds.
TIMEOUT = 300

LATENCY, BW, BIBW, COLL = "latency", "bw", "bibw", "coll"

# The backends --backend takes.
BACKENDS = ("gloo", "multirail")


class Test:
    def __init__(self, name, title, kind, elem=None):
        self.name, self.title, self.kind, self.elem = name, title, kind, elem


# The tests of comm/osu/tests.go, in its order.
TESTS = [
    Test("latency", "Latency", LATENCY),
    Test("bw", "Bandwidth", BW),
    Test("bibw", "Bi-Directional Bandwidth", BIBW),
    Test("barrier", "Barrier Latency", COLL),
    Test("bcast", "Broadcast Latency", COLL, "int32"),
    Test("allreduce", "Allreduce Latency", COLL, "float32"),
    Test("allgather", "Allgather Latency", COLL, "int32"),
    Test("reduce-scatter", "Reduce_scatter Latency", COLL, "float32"),
    Test("alltoall", "All-to-All Personalized Exchange Latency", COLL, "int32"),
]
NAMES = ", ".join(t.name for t in TESTS)


class Usage(Exception):
    """Bad arguments; the message says what and what is allowed."""


class Unsupported(Exception):
    """A test this torch's backend cannot run."""


class Plan:
    def __init__(self):
        self.test = None
        self.sizes = []
        self.iters = 0  # 0: defaults by size
        self.warmup = 0
        self.validate = False
        self.dry = False
        self.backend = "gloo"


# ---- arguments (mrosu's parse) ----

INT_RE = re.compile(r"-?[0-9]+")


def parse_long(s):
    if not INT_RE.fullmatch(s):
        return None
    return int(s)


def parse_size(spec, e):
    v = parse_long(e)
    if v is None:
        raise Usage(f'SIZES "{spec}": "{e}" is not a size in bytes; allowed: comma-separated sizes '
                    f"{MIN_SIZE}..{MAX_SIZE} or MIN:MAX ranges, e.g. 4:1048576")
    if v < MIN_SIZE or v > MAX_SIZE:
        raise Usage(f'SIZES "{spec}": size {v} is out of range: allowed {MIN_SIZE}..{MAX_SIZE} bytes')
    return v


def parse_sizes(spec):
    out = []
    for e in spec.split(","):
        e = e.strip(" \t")
        if not e:
            continue
        lo, colon, hi = e.partition(":")
        a = parse_size(spec, lo.strip(" \t"))
        b = a
        if colon:
            b = parse_size(spec, hi.strip(" \t"))
            if a > b:
                raise Usage(f'SIZES "{spec}": range {a}:{b} has MIN > MAX; want MIN:MAX with MIN <= MAX')
        v = a
        while v <= b:
            out.append(v)
            v *= 2
    if not out:
        raise Usage(f'SIZES "{spec}": no sizes; want a comma-separated list of sizes in bytes or MIN:MAX ranges, e.g. 4:1048576')
    return sorted(set(out))


def parse_count(what, s):
    v = parse_long(s)
    if v is None or v < 0 or v > MAX_ITERS:
        raise Usage(f'{what} "{s}" is out of range: allowed 1..{MAX_ITERS}, or 0 for the defaults by size')
    return v


def parse(args, nranks):
    """parse checks the command line as mrosu's parse does."""
    p = Plan()
    a = 0
    while a < len(args) and args[a].startswith("--"):
        name, eq, val = args[a].partition("=")
        if args[a] == "--validate":
            p.validate = True
        elif args[a] == "--plan":
            p.dry = True
        elif name == "--backend":
            if not eq:
                if a + 1 >= len(args):
                    raise Usage(f"--backend needs a value; allowed: {', '.join(BACKENDS)}")
                a += 1
                val = args[a]
            if val not in BACKENDS:
                raise Usage(f'--backend "{val}": unknown backend; allowed: {", ".join(BACKENDS)}')
            p.backend = val
        else:
            raise Usage(f'unknown option "{args[a]}"; allowed: --validate, --backend gloo|multirail, --plan')
        a += 1
    rest = args[a:]
    if len(rest) < 2 or len(rest) > 4:
        raise Usage(f"usage: gloo_osu [--validate] [--backend gloo|multirail] TEST SIZES [ITERS [WARMUP]], got {len(rest)} arguments; TEST one of {NAMES}")
    name, spec = rest[0], rest[1]
    for t in TESTS:
        if t.name == name:
            p.test = t
    if p.test is None:
        raise Usage(f'unknown test "{name}"; allowed: {NAMES}')
    sizes = parse_sizes(spec)
    t = p.test
    if t.name == "barrier":
        sizes = [0]
    elif t.kind == COLL:  # osu.ElemSizes
        sizes = sorted({s // 4 * 4 for s in sizes if s >= 4})
        if not sizes:
            raise Usage(f'SIZES "{spec}": every size is below 4 bytes; {t.name} moves 4-byte {t.elem} elements')
    elif t.kind != LATENCY and sizes[-1] > MAX_BW_SIZE:
        raise Usage(f'SIZES "{spec}": {sizes[-1]} bytes is too large for {t.name}, which has 64 messages in flight: '
                    f"allowed up to {MAX_BW_SIZE} (16 MiB)")
    p.sizes = sizes
    if len(rest) >= 3:
        p.iters = parse_count("ITERS", rest[2])
    if len(rest) >= 4:
        p.warmup = parse_count("WARMUP", rest[3])
    if t.kind != COLL and nranks < 2 and not p.dry:
        raise Usage(f"{t.name} needs at least 2 ranks; this job has {nranks}")
    return p


# ---- iterations (comm/osu/tests.go DefaultIters, Plan.ItersFor) ----


def iters_for(p, size):
    if p.test.kind in (BW, BIBW):
        if size <= SMALL_SIZE:
            iters, warmup = 100, 10
        else:
            iters = min(max(BW_BUDGET // (WINDOW * size), 3), 20)
            warmup = max(1, iters // 10)
    elif size <= SMALL_SIZE and p.test.kind == LATENCY:
        iters, warmup = 10000, 100
    elif size <= SMALL_SIZE:
        iters, warmup = 1000, 100
    elif size < LARGE_SIZE:
        iters, warmup = 100, 10
    else:
        iters, warmup = 20, 2
    if p.iters > 0:
        iters = p.iters
    if p.warmup > 0:
        warmup = p.warmup
    return iters, warmup


# ---- closed forms of --validate (comm/osu/validate.go) ----

MASK64 = (1 << 64) - 1


def reduce_in(np, r, count):
    return ((r + 1) * (np.arange(count, dtype=np.int64) % 7 + 1)).astype(np.float32)


def reduce_want(np, n, lo, count):
    return (n * (n + 1) // 2 * (np.arange(lo, lo + count, dtype=np.int64) % 7 + 1)).astype(np.float32)


def values(np, a, b, count):
    """values are value(a, b, i) for i in 0..count-1 as int32."""
    a32, b32 = a & 0xFFFFFFFF, b & 0xFFFFFFFF
    u = np.uint64
    with np.errstate(over="ignore"):
        x = np.arange(count, dtype=np.uint64) * u(0x9E3779B97F4A7C15)
        x ^= u(((a32 << 40) ^ (b32 << 20)) & MASK64)
        x ^= u((a32 * 0xBF58476D1CE4E5B9) & MASK64)
        x ^= u((b32 * 0x94D049BB133111EB) & MASK64)
        x ^= x >> u(30)
        x *= u(0xBF58476D1CE4E5B9)
        x ^= x >> u(27)
        x *= u(0x94D049BB133111EB)
        x ^= x >> u(31)
    return (x & u(0x7FFFFFFF)).astype(np.int32)


def payload(np, src, size):
    """payload is the point-to-point message of size bytes that rank src sends."""
    k = np.arange(size, dtype=np.int64)
    return ((k * 131 + size * 7 + src * 17 + 1) % 251).astype(np.uint8)


# A byte no pattern has (patterns are < 251): what receive buffers hold
# before a validated receive.
POISON = 0xFF


class Measure:
    def __init__(self):
        self.avg = self.min = self.max = 0.0  # microseconds
        self.bytes = self.secs = 0.0  # bw, bibw
        self.bad = -1
        self.cpu = 0.0  # seconds of CPU this process used (all threads)
        self.bad_iter = 0
        self.got = self.want = ""

    def first_diff(self, got, want, offset, it):
        """records the first element where got (a tensor) differs from want (an array)."""
        if self.bad >= 0:
            return
        g = got.numpy()
        diff = (g != want).nonzero()[0]
        if len(diff):
            i = int(diff[0])
            self.bad, self.bad_iter, self.got, self.want = offset + i, it, str(g[i]), str(want[i])


class Timings:
    """sums the durations of the timed iterations (after the warmup) and keeps their extremes."""

    def __init__(self, warmup):
        self.warmup = warmup
        self.total = self.lo = self.hi = 0
        self.counted = False

    def add(self, i, d):
        if i < self.warmup:
            return
        if not self.counted:
            self.lo = self.hi = d
            self.counted = True
        self.total += d
        self.lo, self.hi = min(self.lo, d), max(self.hi, d)

    def set(self, m, n, per):
        m.avg = self.total / 1e3 / n
        m.min, m.max = self.lo / 1e3 / per, self.hi / 1e3 / per


now = time.perf_counter_ns


# ---- point to point ----


def run_latency(env, p, size, iters, warmup, m):
    torch, dist, np = env.torch, env.dist, env.np
    dist.barrier()
    rank = env.rank
    if rank > 1:
        return
    peer = 1 - rank
    sbuf = torch.from_numpy(payload(np, rank, size))
    rbuf = torch.empty(size, dtype=torch.uint8)
    want = payload(np, peer, size) if p.validate else None
    tm = Timings(warmup)
    for i in range(warmup + iters):
        if p.validate:
            rbuf.fill_(POISON)
        t0 = now()
        if rank == 0:
            dist.send(sbuf, peer)
            dist.recv(rbuf, peer)
        else:
            dist.recv(rbuf, peer)
            dist.send(sbuf, peer)
        d = now() - t0
        if p.validate:
            m.first_diff(rbuf, want, 0, i)
        tm.add(i, d)
    tm.set(m, 2 * iters, 2)  # a round trip is two latencies


def check_window(m, np, rbuf, src, size, it):
    want = np.tile(payload(np, src, size), WINDOW)
    m.first_diff(rbuf.view(-1), want, 0, it)
    if m.bad >= 0 and m.bad_iter == it:
        m.bad %= size  # the byte within its message, as mrosu reports it


def run_bw(env, p, size, iters, warmup, m):
    torch, dist, np = env.torch, env.dist, env.np
    dist.barrier()
    rank = env.rank
    if rank > 1:
        return
    ack = torch.zeros(4, dtype=torch.uint8)
    # Every receive of a window has a buffer of its own.
    if rank == 0:
        buf = torch.from_numpy(payload(np, 0, size))
    else:
        buf = torch.empty((WINDOW, size), dtype=torch.uint8)
    tm = Timings(warmup)
    for i in range(warmup + iters):
        if rank == 1 and p.validate:
            buf.fill_(POISON)
        t0 = now()
        if rank == 0:
            reqs = [dist.isend(buf, 1) for _ in range(WINDOW)]
            for r in reqs:
                r.wait()
            dist.recv(ack, 1)
        else:
            reqs = [dist.irecv(buf[j], 0) for j in range(WINDOW)]
            for r in reqs:
                r.wait()
            dist.send(ack, 0)
            if p.validate:
                check_window(m, np, buf, 0, size, i)
        tm.add(i, now() - t0)
    tm.set(m, iters * WINDOW, WINDOW)
    m.bytes = float(size) * WINDOW * iters
    m.secs = tm.total / 1e9


def run_bibw(env, p, size, iters, warmup, m):
    torch, dist, np = env.torch, env.dist, env.np
    dist.barrier()
    rank = env.rank
    if rank > 1:
        return
    peer = 1 - rank
    sbuf = torch.from_numpy(payload(np, rank, size))
    rbuf = torch.empty((WINDOW, size), dtype=torch.uint8)
    tm = Timings(warmup)
    for i in range(warmup + iters):
        if p.validate:
            rbuf.fill_(POISON)
        t0 = now()
        reqs = [dist.irecv(rbuf[j], peer) for j in range(WINDOW)]
        reqs += [dist.isend(sbuf, peer) for _ in range(WINDOW)]
        for r in reqs:
            r.wait()
        d = now() - t0
        if p.validate:
            check_window(m, np, rbuf, peer, size, i)
        tm.add(i, d)
    tm.set(m, iters * WINDOW, WINDOW)
    m.bytes = 2.0 * size * WINDOW * iters
    m.secs = tm.total / 1e9


# ---- collectives ----


def rs_block(count, n, r):
    """block r of count elements over n ranks (comm.ReduceScatterCounts)."""
    return r * count // n, (r + 1) * count // n


def run_coll(env, p, size, iters, warmup, m):
    """a barrier, then warmup+iters calls, each timed alone, a barrier after
    each; the rank's average over the timed ones."""
    torch, dist, np = env.torch, env.dist, env.np
    rank, n = env.rank, env.size
    name = p.test.name
    count = size // 4
    prepare = check = None
    if name == "barrier":

        def op():
            dist.barrier()

    elif name == "allreduce":
        inp = torch.from_numpy(reduce_in(np, rank, count))
        buf = torch.empty_like(inp)
        want = reduce_want(np, n, 0, count) if p.validate else None

        def prepare():  # all_reduce works in place
            buf.copy_(inp)

        def op():
            dist.all_reduce(buf, op=dist.ReduceOp.SUM)

        def check(i):
            m.first_diff(buf, want, 0, i)

    elif name == "reduce-scatter":
        send = torch.from_numpy(reduce_in(np, rank, count))
        blocks = [send[a:b] for a, b in (rs_block(count, n, r) for r in range(n))]
        lo, hi = rs_block(count, n, rank)
        recv = torch.empty(hi - lo, dtype=torch.float32)
        want = reduce_want(np, n, lo, hi - lo) if p.validate else None
        if p.validate:

            def prepare():
                recv.fill_(-1)

        def op():
            dist.reduce_scatter(recv, blocks, op=dist.ReduceOp.SUM)

        def check(i):
            m.first_diff(recv, want, lo, i)

    elif name == "bcast":
        want = values(np, -2, -2, count)
        buf = torch.from_numpy(want.copy()) if rank == 0 else torch.empty(count, dtype=torch.int32)
        if p.validate and rank != 0:

            def prepare():
                buf.fill_(-1)

        def op():
            dist.broadcast(buf, 0)

        def check(i):
            m.first_diff(buf, want, 0, i)

    elif name == "allgather":
        send = torch.from_numpy(values(np, rank, -1, count))
        recv = torch.empty(n * count, dtype=torch.int32)
        outs = list(recv.view(n, count).unbind(0))
        want = np.concatenate([values(np, r, -1, count) for r in range(n)]) if p.validate else None
        if p.validate:

            def prepare():
                recv.fill_(-1)

        def op():
            dist.all_gather(outs, send)

        def check(i):
            m.first_diff(recv, want, 0, i)

    elif name == "alltoall":
        send = torch.from_numpy(np.concatenate([values(np, rank, j, count) for j in range(n)]))
        recv = torch.empty(n * count, dtype=torch.int32)
        want = np.concatenate([values(np, j, rank, count) for j in range(n)]) if p.validate else None
        if p.validate:

            def prepare():
                recv.fill_(-1)

        def op():
            dist.all_to_all_single(recv, send)

        def check(i):
            m.first_diff(recv, want, 0, i)

    else:
        raise RuntimeError(f"no runner for {name}")
    barrier = name != "barrier"  # a barrier needs no barrier after it
    dist.barrier()
    total = 0
    for i in range(warmup + iters):
        if prepare is not None:
            prepare()
        t0 = now()
        try:
            op()
        except RuntimeError as e:
            if env.first_call:
                raise Unsupported(f"{type(e).__name__}: {e}") from e
            raise
        d = now() - t0
        env.first_call = False
        if i >= warmup:
            total += d
        if p.validate and check is not None:
            check(i)
        if barrier:
            dist.barrier()
    m.avg = total / 1e3 / iters
    m.min = m.max = m.avg


# ---- the row (report.go's combine and summarize) ----


def bus_factor(name, n):
    if n < 1:
        return 0.0
    f = (n - 1) / n
    return {"allreduce": 2 * f, "allgather": f, "reduce-scatter": f, "alltoall": f, "bcast": 1.0}.get(name, 0.0)


def alg_bytes(name, size, n):
    return float(size) * n if name in ("allgather", "alltoall") else float(size)


def combine(env, p, size, iters, warmup, m, busy=None):
    """gathers every rank's measurement; rank 0 prints the row (after the
    busy line, when busy is (machine share, wall seconds)). It returns
    True on every rank if any rank found a wrong value."""
    torch, dist = env.torch, env.dist
    n, t = env.size, p.test
    mine = torch.tensor([m.avg, m.min, m.max, m.bytes, m.secs, float(m.bad), m.cpu], dtype=torch.float64)
    every = torch.empty(n * GATHERED, dtype=torch.float64)
    dist.all_gather(list(every.view(n, GATHERED).unbind(0)), mine)
    a = every.tolist()
    if any(a[GATHERED * r + 5] >= 0 for r in range(n)):
        if m.bad >= 0:
            err(f"{t.name}: validation failed on rank {env.rank} at size {size}: element {m.bad} "
                f"(iteration {m.bad_iter}) = {m.got}, want {m.want}")
        return True
    if env.rank == 0 and busy is not None:
        share, wall = busy
        ranks = sum(a[GATHERED * r + 6] for r in range(n)) / (wall * (os.cpu_count() or 1)) if wall > 0 else -1.0
        print("# gloo_osu: busy %d %.3f %.3f" % (size, share, ranks), flush=True)
    if env.rank == 0:
        busbw = mbs = 0.0
        if t.kind != COLL:  # rank 0 measured
            avg, lo, hi = a[0], a[1], a[2]
            if t.kind != LATENCY and a[4] > 0:
                mbs = a[3] / a[4] / 1e6
        else:
            avgs = [a[GATHERED * r] for r in range(n)]
            avg, lo, hi = sum(avgs) / n, min(avgs), max(avgs)
            if t.name != "barrier" and avg > 0:
                busbw = alg_bytes(t.name, size, n) * 8 / (avg / 1e6) * bus_factor(t.name, n)
        print("MROSU %s %d %d %.3f %.3f %.3f %.1f %.3f %d %d" % (t.name, n, size, avg, lo, hi, busbw, mbs, iters, warmup), flush=True)
    return False


# ---- main ----


def err(msg):
    print("gloo_osu: " + msg, file=sys.stderr, flush=True)


def read_busy():
    """the machine's busy CPU time in seconds (lab/cpu.go's
    ParseProcStat), None if /proc/stat cannot be read."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        if fields[0] != "cpu":
            return None
        try:
            hz = os.sysconf("SC_CLK_TCK")
        except (ValueError, OSError):
            hz = 100
        return sum(int(fields[i]) for i in (1, 2, 3, 6, 7)) / hz
    except (OSError, ValueError, IndexError):
        return None


def cpu_seconds():
    """user+system CPU time of this process, all its threads."""
    t = os.times()
    return t.user + t.system


def busy_share(b0, w0, b1, w1):
    """the busy share of all CPUs between two read_busy()s at wall times
    w0 and w1; -1 if unknown."""
    if b0 is None or b1 is None or w1 <= w0:
        return -1.0
    return (b1 - b0) / ((w1 - w0) * (os.cpu_count() or 1))


def interfaces(backend):
    if backend == "gloo":
        return "GLOO_SOCKET_IFNAME=" + os.environ.get("GLOO_SOCKET_IFNAME", "")
    return "MULTIRAIL_IFNAME=" + os.environ.get("MULTIRAIL_IFNAME", "") + \
        " MULTIRAIL_PLAINTEXT=" + os.environ.get("MULTIRAIL_PLAINTEXT", "")


class Env:
    """torch and the process group."""

    def __init__(self, torch, dist, np):
        self.torch, self.dist, self.np = torch, dist, np
        self.rank, self.size = dist.get_rank(), dist.get_world_size()
        self.first_call = True


RUNNERS = {LATENCY: run_latency, BW: run_bw, BIBW: run_bibw, COLL: run_coll}


def main(argv):
    rank0 = os.environ.get("RANK", "0") == "0"
    try:
        nranks = int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        nranks = 1
    # Every rank parses the same arguments and comes to the same end.
    try:
        p = parse(argv, nranks)
    except Usage as e:
        if rank0:
            err(str(e))
        return 2
    if p.dry:
        for size in p.sizes:
            iters, warmup = iters_for(p, size)
            print(f"PLAN {p.test.name} {size} {iters} {warmup}")
        return 0
    try:
        import numpy as np
        import torch
        import torch.distributed as dist
    except ImportError as e:
        err(f"cannot import torch with {sys.executable} ({e}); install python3-torch")
        return 4
    if p.backend == "multirail":
        try:
            import multirail.torch  # noqa: F401 - registers the backend
        except Exception as e:  # noqa: BLE001 - any failure to load the library
            err(f"cannot import multirail.torch with {sys.executable} ({type(e).__name__}: {e}); "
                "build it with sh scripts/build-python.sh and run .venv/bin/python")
            return 4
    elif not dist.is_available() or not dist.is_gloo_available():
        err(f"torch {torch.__version__} has no torch.distributed with the gloo backend")
        return 4
    dist.init_process_group(p.backend, timeout=datetime.timedelta(seconds=TIMEOUT))
    env = Env(torch, dist, np)
    t = p.test
    hosts = [None] * env.size
    dist.all_gather_object(hosts, socket.gethostname())
    if env.rank == 0:
        title = f"# gloo_osu: OSU-style {t.title} Test (torch {torch.__version__}, {p.backend}), ranks {env.size}"
        if t.elem:
            title += f", datatype {t.elem}"
        print(title + (", validated" if p.validate else ""))
        print(f"# gloo_osu: hosts of ranks 0..{env.size - 1}: {' '.join(hosts)}; {interfaces(p.backend)}")
        print("# MROSU test ranks size avg_us min_us max_us busbw_bps mb_s iters warmup", flush=True)
    status = 0
    try:
        for size in p.sizes:
            iters, warmup = iters_for(p, size)
            m = Measure()
            dist.barrier()  # every rank's window starts together
            b0, w0, c0 = read_busy(), time.perf_counter(), cpu_seconds()
            RUNNERS[t.kind](env, p, size, iters, warmup, m)
            b1, w1 = read_busy(), time.perf_counter()
            m.cpu = cpu_seconds() - c0
            if combine(env, p, size, iters, warmup, m, (busy_share(b0, w0, b1, w1), w1 - w0)):
                status = 1
                break
        # Every rank is done measuring before anyone leaves.
        dist.barrier()
    except Unsupported as e:
        if env.rank == 0:
            err(f"{t.name}: torch {torch.__version__}'s {p.backend} backend cannot run it: {e}")
        return 3
    dist.destroy_process_group()
    return status


if __name__ == "__main__":
    # kill -USR1 on a rank prints every Python thread's stack on stderr
    # (a run that hangs: lab bench -v shows it).
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as e:  # noqa: BLE001 - one line, not a traceback per rank
        err(f"rank {os.environ.get('RANK', '?')}: {type(e).__name__}: {e}")
        sys.exit(1)
