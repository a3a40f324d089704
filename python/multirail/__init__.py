"""multirail: a Python face of the multirail communicator (libmultirail.so).

Pure Python over ctypes; nothing is compiled against Python or torch.

    import multirail
    c = multirail.init_env()                 # under any launcher comm.Init knows
    buf = array.array("d", [1.0, 2.0])
    c.allreduce(buf)                          # in place, op "sum"
    print(c.rank, c.size, list(buf))

Two-step start (the NCCL shape) for programs that meet another way:

    tok = multirail.new_token()               # on one rank, shared with all
    p = multirail.prepare(rank, size, token=tok)
    cards = exchange(p.card)                  # e.g. MPI_Allgather, a key-value store
    c = p.connect(cards)

Buffers are anything with the buffer protocol (bytearray, array.array,
memoryview, numpy arrays); the element type comes from the buffer's format
unless dtype= names it ("bfloat16" needs it). Errors are multirail.Error
subclasses (which are RuntimeErrors) carrying .code. Import multirail.torch
for the torch.distributed backend "multirail".
"""

import ctypes
import json
import os
import time

from . import _lib
from ._lib import (  # noqa: F401 (re-exported)
    ANY_SOURCE,
    ANY_TAG,
    AVG,
    BAND,
    BFLOAT16,
    BOOL,
    BOR,
    BXOR,
    FLOAT16,
    FLOAT32,
    FLOAT64,
    INT8,
    INT32,
    INT64,
    MAX,
    MAX_TAG,
    MIN,
    PROD,
    SUM,
    UINT8,
    forked,
)
from .errors import (  # noqa: F401 (re-exported)
    AbortedError,
    BootstrapError,
    ClosedError,
    ConfigError,
    Error,
    ForkError,
    InternalError,
    InvalidError,
    PanicError,
    PeerError,
    TimeoutError,
    TruncatedError,
)

__version__ = "0.1.0"

# How long one blocking slice of a wait lasts: a KeyboardInterrupt (Ctrl-C)
# is raised at the latest this long after it arrives.
WAIT_SLICE_MS = 50

_OPS = {
    "sum": SUM,
    "prod": PROD,
    "product": PROD,
    "min": MIN,
    "max": MAX,
    "avg": AVG,
    "mean": AVG,
    "band": BAND,
    "bor": BOR,
    "bxor": BXOR,
}
_DTYPES = {n: i for i, n in enumerate(_lib.DTYPE_NAMES)}

def op_code(op):
    """The mr_op for "sum", "avg", ... or an int."""
    if isinstance(op, int):
        if 0 <= op < len(_lib.OP_NAMES):
            return op
    elif isinstance(op, str) and op.lower() in _OPS:
        return _OPS[op.lower()]
    raise InvalidError(-1, f"multirail: unknown reduction {op!r}; allowed: {', '.join(_lib.OP_NAMES)}")


def dtype_code(dtype):
    """The mr_dtype for "float32", ... or an int."""
    if isinstance(dtype, int):
        if 0 <= dtype < len(_lib.DTYPE_NAMES):
            return dtype
    elif isinstance(dtype, str) and dtype.lower() in _DTYPES:
        return _DTYPES[dtype.lower()]
    raise InvalidError(-1, f"multirail: unknown dtype {dtype!r}; allowed: {', '.join(_lib.DTYPE_NAMES)}")


def _format_dtype(fmt, itemsize):
    f = fmt.lstrip("@=<>!")
    if f in ("B", "c"):
        return UINT8
    if f == "b":
        return INT8
    if f == "?":
        return BOOL
    if f in ("i", "l", "q", "n") and itemsize in (4, 8):
        return INT32 if itemsize == 4 else INT64
    if f == "e":
        return FLOAT16
    if f == "f":
        return FLOAT32
    if f == "d":
        return FLOAT64
    return None


class _Buf:
    """A buffer's address, element count and dtype, kept alive."""

    __slots__ = ("addr", "count", "dtype", "nbytes", "keep")

    def __init__(self, obj, dtype=None, writable=True, what="buffer"):
        if obj is None:
            self.addr, self.count, self.nbytes, self.keep = None, 0, 0, None
            self.dtype = dtype_code(dtype) if dtype is not None else None
            return
        mv = memoryview(obj)
        if not mv.c_contiguous:
            raise InvalidError(-1, f"multirail: {what} is not C-contiguous")
        nbytes = mv.nbytes
        if dtype is None:
            dt = _format_dtype(mv.format, mv.itemsize)
            if dt is None:
                raise InvalidError(
                    -1, f"multirail: {what} has element format {mv.format!r}, no multirail dtype; pass dtype="
                )
        else:
            dt = dtype_code(dtype)
        size = _lib.DTYPE_SIZES[dt]
        if nbytes % size:
            raise InvalidError(-1, f"multirail: {what} has {nbytes} bytes, not a whole number of {_lib.DTYPE_NAMES[dt]}")
        if nbytes == 0:
            self.addr, self.keep = None, mv
        elif mv.readonly:
            if writable:
                raise InvalidError(-1, f"multirail: {what} is read-only")
            c = (ctypes.c_char * nbytes).from_buffer_copy(mv)
            self.addr, self.keep = ctypes.addressof(c), c
        else:
            c = (ctypes.c_char * nbytes).from_buffer(mv.cast("B"))
            self.addr, self.keep = ctypes.addressof(c), (c, mv)
        self.count, self.dtype, self.nbytes = nbytes // size, dt, nbytes


def _i64s(xs):
    return (ctypes.c_int64 * len(xs))(*[int(x) for x in xs])


def config_json(config=None):
    """The config_json of mr_prepare/mr_init_env for a dict (None: defaults).
    Keys (capi/multirail.h): ifname, emu, scheduler, timeout, algorithms,
    token, insecure, loopback_rails, busy_poll. Fields left out are taken
    from the environment by the library (MULTIRAIL_IFNAME, MULTIRAIL_EMU,
    MULTIRAIL_EMU_LOAD, MULTIRAIL_SCHED, MULTIRAIL_TIMEOUT, MULTIRAIL_ALGO,
    MULTIRAIL_BUSY_POLL, MULTIRAIL_TOKEN, MULTIRAIL_INSECURE)."""
    return json.dumps(dict(config)).encode() if config else None


class Status:
    """What a receive got: source rank, tag, bytes."""

    __slots__ = ("source", "tag", "bytes")

    def __init__(self, st):
        self.source, self.tag, self.bytes = st.source, st.tag, st.bytes

    def __repr__(self):
        return f"Status(source={self.source}, tag={self.tag}, bytes={self.bytes})"


class Request:
    """A nonblocking call in progress. Its buffers stay in use (and referenced
    here) until test() reports done or wait() returns."""

    def __init__(self, handle, keep, what):
        self.handle = handle
        self._keep = keep
        self._what = what
        self.done = False
        self.status = None

    def _finish(self, rc, err, st):
        self.done = True
        self._keep = None
        self.status = Status(st)
        _lib.check(rc, err, self._what)

    def test(self):
        """True when finished (raises the call's error); False while running."""
        if self.done:
            return True
        L = _lib.lib()
        err, st, done = _lib.mr_error(), _lib.mr_status(), ctypes.c_int(0)
        rc = L.mr_test(self.handle, ctypes.byref(done), ctypes.byref(st), ctypes.byref(err))
        if rc < 0 or done.value:
            self._finish(rc, err, st)
            return True
        return False

    def wait(self, timeout=None):
        """Waits until finished (timeout seconds at most: then TimeoutError and
        the request goes on). Waits in slices of WAIT_SLICE_MS so Ctrl-C
        (KeyboardInterrupt) is honoured. Returns the Status."""
        if self.done:
            return self.status
        L = _lib.lib()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            ms = WAIT_SLICE_MS
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(-7, f"multirail: {self._what}: not finished after {timeout} s")
                ms = max(0, min(ms, int(left * 1000)))
            err, st = _lib.mr_error(), _lib.mr_status()
            rc = L.mr_wait(self.handle, ms, ctypes.byref(st), ctypes.byref(err))
            if rc == -7:  # MR_ERR_TIMEOUT: still running
                continue
            self._finish(rc, err, st)
            return self.status

    def free(self):
        """Abandons the request (its buffers stay in use until the communicator is freed)."""
        if not self.done and not forked():
            _lib.call("mr_request_free", self.handle)
            self.done = True


class Comm:
    """A communicator. Collectives run in the order called, the same order on
    every rank. Close it with close() (or use it as a context manager)."""

    def __init__(self, handle, parent=None):
        self.handle = handle
        self._parent = parent  # a group keeps its parent alive
        self._closed = False
        self.rank = _lib.lib().mr_comm_rank(handle)
        self.size = _lib.lib().mr_comm_size(handle)

    def __repr__(self):
        return f"multirail.Comm(rank={self.rank}, size={self.size}, handle={self.handle})"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Frees the communicator (no-op after fork or when already closed)."""
        if self._closed or forked():
            return
        self._closed = True
        _lib.call("mr_comm_free", self.handle)

    def abort(self, reason="aborted"):
        """Tells every rank this one gives up; their calls fail with AbortedError."""
        _lib.call("mr_abort", self.handle, reason.encode())

    def group(self, ranks, key=""):
        """A communicator of a subset of ranks (new rank i is ranks[i]), made
        without communication: called only by the members, all with the same
        ranks and key."""
        arr = (ctypes.c_int32 * len(ranks))(*ranks)
        out = _lib.mr_comm()
        _lib.call("mr_comm_group", self.handle, arr, len(ranks), str(key).encode(), ctypes.byref(out))
        return Comm(out.value, parent=self)

    # -- blocking collectives: each runs its nonblocking twin and waits in slices
    # (so Ctrl-C works); recv=None means in place where the call allows it.

    def barrier(self):
        self.ibarrier().wait()

    def bcast(self, buf, root=0, dtype=None):
        self.ibcast(buf, root, dtype).wait()

    def reduce(self, send, recv=None, op="sum", root=0, dtype=None):
        self.ireduce(send, recv, op, root, dtype).wait()

    def allreduce(self, send, recv=None, op="sum", dtype=None):
        self.iallreduce(send, recv, op, dtype).wait()

    def allgather(self, send, recv, dtype=None):
        self.iallgather(send, recv, dtype).wait()

    def reduce_scatter(self, send, recv, op="sum", dtype=None):
        self.ireduce_scatter(send, recv, op, dtype).wait()

    def alltoall(self, send, recv, dtype=None):
        self.ialltoall(send, recv, dtype).wait()

    def alltoallv(self, send, sendcounts, sdispls, recv, recvcounts, rdispls, dtype=None):
        self.ialltoallv(send, sendcounts, sdispls, recv, recvcounts, rdispls, dtype).wait()

    def gather(self, send, recv=None, root=0, dtype=None):
        self.igather(send, recv, root, dtype).wait()

    def scatter(self, send, recv, root=0, dtype=None):
        self.iscatter(send, recv, root, dtype).wait()

    def send(self, buf, dst, tag=0):
        self.isend(buf, dst, tag).wait()

    def recv(self, buf, src=ANY_SOURCE, tag=ANY_TAG):
        """Receives into buf; returns a Status (source, tag, bytes)."""
        return self.irecv(buf, src, tag).wait()

    def lossy_allreduce(self, buf, op="avg", stream=0, error_feedback=False, packet_floats=None):
        self.ilossy_allreduce(buf, op, stream, error_feedback, packet_floats).wait()

    # -- nonblocking twins

    def _req(self, name, args, keep, what):
        req = _lib.mr_request()
        _lib.call(name, self.handle, *args, ctypes.byref(req), what=what)
        return Request(req.value, keep, what)

    def ibarrier(self):
        return self._req("mr_ibarrier", (), None, "barrier")

    def ibcast(self, buf, root=0, dtype=None):
        b = _Buf(buf, dtype, True, "bcast buffer")
        return self._req("mr_ibcast", (b.addr, b.count, b.dtype, root), b, "bcast")

    def ireduce(self, send, recv=None, op="sum", root=0, dtype=None):
        s = _Buf(send, dtype, recv is None, "reduce sendbuf")
        r = s if recv is None else _Buf(recv, s.dtype, True, "reduce recvbuf")
        return self._req("mr_ireduce", (s.addr, r.addr, s.count, s.dtype, op_code(op), root), (s, r), "reduce")

    def iallreduce(self, send, recv=None, op="sum", dtype=None):
        s = _Buf(send, dtype, recv is None, "allreduce sendbuf")
        r = s if recv is None else _Buf(recv, s.dtype, True, "allreduce recvbuf")
        return self._req("mr_iallreduce", (s.addr, r.addr, s.count, s.dtype, op_code(op)), (s, r), "allreduce")

    def iallgather(self, send, recv, dtype=None):
        s = _Buf(send, dtype, False, "allgather sendbuf")
        r = _Buf(recv, s.dtype, True, "allgather recvbuf")
        if r.count != s.count * self.size:
            raise InvalidError(-1, f"multirail: allgather: recvbuf holds {r.count} elements, want size*count = {s.count * self.size}")
        return self._req("mr_iallgather", (s.addr, r.addr, s.count, s.dtype), (s, r), "allgather")

    def ireduce_scatter(self, send, recv, op="sum", dtype=None):
        s = _Buf(send, dtype, False, "reduce_scatter sendbuf")
        r = _Buf(recv, s.dtype, True, "reduce_scatter recvbuf")
        if s.count != r.count * self.size:
            raise InvalidError(-1, f"multirail: reduce_scatter: sendbuf holds {s.count} elements, want size*recvcount = {r.count * self.size}")
        return self._req("mr_ireduce_scatter", (s.addr, r.addr, r.count, s.dtype, op_code(op)), (s, r), "reduce_scatter")

    def ialltoall(self, send, recv, dtype=None):
        s = _Buf(send, dtype, False, "alltoall sendbuf")
        r = _Buf(recv, s.dtype, True, "alltoall recvbuf")
        if s.count != r.count or s.count % self.size:
            raise InvalidError(-1, f"multirail: alltoall: buffers of {s.count} and {r.count} elements; want equal multiples of size {self.size}")
        return self._req("mr_ialltoall", (s.addr, r.addr, s.count // self.size, s.dtype), (s, r), "alltoall")

    def ialltoallv(self, send, sendcounts, sdispls, recv, recvcounts, rdispls, dtype=None):
        s = _Buf(send, dtype, False, "alltoallv sendbuf")
        r = _Buf(recv, s.dtype, True, "alltoallv recvbuf")
        arrs = [_i64s(x) for x in (sendcounts, sdispls, recvcounts, rdispls)]
        if any(len(a) != self.size for a in arrs):
            raise InvalidError(-1, f"multirail: alltoallv: counts and displacements need {self.size} entries each")
        return self._req("mr_ialltoallv", (s.addr, arrs[0], arrs[1], r.addr, arrs[2], arrs[3], s.dtype), (s, r, arrs), "alltoallv")

    def igather(self, send, recv=None, root=0, dtype=None):
        s = _Buf(send, dtype, False, "gather sendbuf")
        r = _Buf(recv, s.dtype, True, "gather recvbuf")
        return self._req("mr_igather", (s.addr, r.addr, s.count, s.dtype, root), (s, r), "gather")

    def iscatter(self, send, recv, root=0, dtype=None):
        r = _Buf(recv, dtype, True, "scatter recvbuf")
        s = _Buf(send, r.dtype, False, "scatter sendbuf")
        return self._req("mr_iscatter", (s.addr, r.addr, r.count, r.dtype, root), (s, r), "scatter")

    def isend(self, buf, dst, tag=0):
        b = _Buf(buf, "uint8", False, "send buffer")
        return self._req("mr_isend", (b.addr, b.nbytes, dst, tag), b, "send")

    def irecv(self, buf, src=ANY_SOURCE, tag=ANY_TAG):
        b = _Buf(buf, "uint8", True, "recv buffer")
        return self._req("mr_irecv", (b.addr, b.nbytes, src, tag), b, "recv")

    def ilossy_allreduce(self, buf, op="avg", stream=0, error_feedback=False, packet_floats=None):
        b = _Buf(buf, "float32", True, "lossy_allreduce buffer")
        return self._req("mr_ilossy_allreduce", (b.addr, b.count, op_code(op), stream, lossy_opts(error_feedback, packet_floats)), b, "lossy allreduce")

    def lossy_report(self, stream, quality):
        """Reports the quality of stream's last loss-tolerant result (higher is better)."""
        _lib.call("mr_lossy_report", self.handle, int(stream), float(quality))

    def lossy_stats(self, stream=0):
        """{"packets", "discarded", "received", "missing"} of one stream."""
        out = _lib.mr_lossy_stats()
        _lib.call("mr_lossy_stats", self.handle, int(stream), ctypes.byref(out))
        return {k: getattr(out, k) for k in ("packets", "discarded", "received", "missing")}

    def poll(self, max=64, timeout=0.0):
        """Handles of finished requests (each reported once), waiting up to timeout s."""
        arr = (_lib.mr_request * max)()
        n = _lib.call("mr_poll", self.handle, arr, max, int(timeout * 1000))
        return list(arr[:n])


def lossy_opts(error_feedback=False, packet_floats=None):
    o = {}
    if error_feedback:
        o["error_feedback"] = True
    if packet_floats:
        o["packet_floats"] = int(packet_floats)
    return json.dumps(o).encode() if o else None


def init_env(config=None):
    """Joins the job under any launcher comm.Init knows (multirail run, torchrun,
    env://, mpirun, srun, Kubernetes). config: a dict of mr_init_env keys."""
    out = _lib.mr_comm()
    _lib.call("mr_init_env", config_json(config), ctypes.byref(out), what="init_env")
    return Comm(out.value)


def new_token():
    """A new random session token (give the same to every rank)."""
    buf = ctypes.create_string_buffer(256)
    _lib.call("mr_new_token", buf, len(buf))
    return buf.value.decode()


class Pending:
    """A rank between prepare() and connect(): .card (bytes) goes to every rank."""

    def __init__(self, handle, rank, size):
        self.handle, self.rank, self.size = handle, rank, size
        self._open = True
        n = 4096
        while True:
            buf = ctypes.create_string_buffer(n)
            got = _lib.call("mr_pending_card", handle, buf, n)
            if got <= n:
                self.card = buf.raw[:got]
                break
            n = got

    def connect(self, cards):
        """cards: every rank's card, by rank. Returns once every rank is connected."""
        if len(cards) != self.size:
            raise InvalidError(-1, f"multirail: connect: {len(cards)} cards for {self.size} ranks")
        cards = [bytes(c) for c in cards]
        arr = (ctypes.c_char_p * len(cards))(*cards)
        lens = _i64s([len(c) for c in cards])
        out = _lib.mr_comm()
        self._open = False
        _lib.call("mr_connect", self.handle, arr, lens, ctypes.byref(out), what="connect")
        return Comm(out.value)

    def free(self):
        if self._open and not forked():
            self._open = False
            _lib.call("mr_pending_free", self.handle)


def prepare(rank, size, token=None, config=None):
    """Step 2 of the two-step start: listens and describes this rank in a card.
    token: the session's (None: MULTIRAIL_TOKEN or config's "token")."""
    out = _lib.mr_pending()
    tok = token.encode() if isinstance(token, str) else token
    _lib.call("mr_prepare", config_json(config), int(rank), int(size), tok, ctypes.byref(out), what="prepare")
    return Pending(out.value, rank, size)

