"""The torch.distributed backend "multirail" (pure Python over libmultirail.so).

    import torch.distributed as dist
    import multirail.torch                      # registers the backend
    dist.init_process_group("multirail")        # torchrun, or env:// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)
    # under `multirail run -n N -- python prog.py`: multirail.torch.init_process_group()

Bootstrap: through the c10d store torch hands the backend (torch's trust
boundary: whoever can reach it can read the cards and, without
MULTIRAIL_TOKEN, the session token rank 0 draws into it). Each rank prepares
(listens, describes itself in a card), publishes its card under
"multirail/card/<rank>", reads every other rank's and connects. Groups of a
subset of ranks (dist.new_group) are made from the world communicator without
communication (mr_comm_group), keyed by torch's group name.

Every collective runs the library's nonblocking twin on the tensor's memory in
place (non-contiguous tensors go through a contiguous copy) and returns a Work
whose wait() waits in slices of 50 ms, so Ctrl-C raises KeyboardInterrupt in
time, and whose get_future() is completed by one poller thread per process
group. Errors are multirail.Error subclasses, which are RuntimeErrors.

LossTolerantState and lossy_allreduce_hook put the loss-tolerant allreduce under
DDP (ddp.register_comm_hook). docs/torch.md has the details.
"""

import atexit
import collections
import ctypes
import datetime
import inspect
import json
import os
import tempfile
import threading
import time
import weakref

import torch
import torch.distributed as dist

import multirail as _mr
from multirail import _lib
from multirail.errors import ERR_CLOSED, ERR_INVALID, ERR_TIMEOUT, ConfigError, Error, InvalidError, error_for

__all__ = [
    "BACKEND",
    "Options",
    "ProcessGroupMultirail",
    "Work",
    "LossTolerantState",
    "lossy_allreduce_hook",
    "init_process_group",
    "world_comm",
]

BACKEND = "multirail"

# Slices of a Work.wait: Ctrl-C is honoured within this long (plus Python's own latency).
WAIT_SLICE_MS = 50
# How long one mr_poll of the poller thread blocks.
POLL_MS = 100
_DEBUG = os.environ.get("MULTIRAIL_TORCH_DEBUG") == "1"


def _debug(*a):
    if _DEBUG:
        import sys

        print(f"multirail.torch[{os.getpid()}] {time.monotonic():.4f}", *a, file=sys.stderr, flush=True)

DTYPES = {
    torch.uint8: _lib.UINT8,
    torch.int8: _lib.INT8,
    torch.bool: _lib.BOOL,
    torch.int32: _lib.INT32,
    torch.int64: _lib.INT64,
    torch.float16: _lib.FLOAT16,
    torch.bfloat16: _lib.BFLOAT16,
    torch.float32: _lib.FLOAT32,
    torch.float64: _lib.FLOAT64,
}

_OPS = {
    "SUM": _lib.SUM,
    "PRODUCT": _lib.PROD,
    "MIN": _lib.MIN,
    "MAX": _lib.MAX,
    "AVG": _lib.AVG,
    "BAND": _lib.BAND,
    "BOR": _lib.BOR,
    "BXOR": _lib.BXOR,
}


def reduce_op(op):
    """The mr_op of a torch ReduceOp (1.13: a ReduceOp whose .op is a RedOpType;
    2.x: RedOpType members too)."""
    if op is None:
        return _lib.SUM
    t = getattr(op, "op", op)
    name = getattr(t, "name", None)
    if name is None:
        name = str(t).rsplit(".", 1)[-1]
    name = name.upper()
    if name not in _OPS:
        raise InvalidError(-1, f"multirail: reduction {name} is not supported; allowed: {', '.join(_OPS)}")
    return _OPS[name]


def _dtype(t, what):
    dt = DTYPES.get(t.dtype)
    if dt is None:
        raise InvalidError(
            -1,
            f"multirail: {what}: dtype {t.dtype} is not supported; allowed: "
            + ", ".join(str(d).replace("torch.", "") for d in DTYPES)
            + " (complex as its real view for sum/avg)",
        )
    return dt


# A one-byte buffer for calls on empty tensors (whose data_ptr may be NULL).
_DUMMY = ctypes.create_string_buffer(8)
_DUMMY_PTR = ctypes.addressof(_DUMMY)


def _ptr(t):
    p = t.data_ptr()
    return p if p else _DUMMY_PTR


class _Dense:
    """A CPU tensor as contiguous memory the library may use in place: the
    tensor itself when contiguous, else a contiguous copy (written back by
    .back() for outputs). Complex tensors go as their real view."""

    __slots__ = ("orig", "buf", "dt", "copied")

    def __init__(self, t, what, op=None):
        if not isinstance(t, torch.Tensor):
            raise InvalidError(-1, f"multirail: {what}: want a torch.Tensor, got {type(t).__name__}")
        if t.device.type != "cpu":
            raise InvalidError(-1, f"multirail: {what}: tensor on {t.device}; the multirail backend takes CPU tensors only")
        if t.is_sparse:
            raise InvalidError(-1, f"multirail: {what}: sparse tensors are not supported")
        self.orig = t
        b = t if t.is_contiguous() else t.contiguous()
        self.copied = b is not t
        if b.is_complex():
            if op is not None and op not in (_lib.SUM, _lib.AVG):
                raise InvalidError(-1, f"multirail: {what}: complex tensors only with SUM or AVG")
            b = torch.view_as_real(b)
        self.buf = b
        self.dt = _dtype(b, what)

    @property
    def ptr(self):
        return _ptr(self.buf)

    @property
    def count(self):
        return self.buf.numel()

    @property
    def nbytes(self):
        return self.buf.numel() * self.buf.element_size()

    def back(self):
        if self.copied:
            src = self.buf
            if self.orig.is_complex():
                src = torch.view_as_complex(src)
            self.orig.copy_(src)


def _lib_call(name, *args, what=None):
    """Issues mr_<name>(*args, &req, &err); returns the request handle."""
    L = _lib.lib()
    req = _lib.mr_request()
    err = _lib.mr_error()
    rc = getattr(L, name)(*args, ctypes.byref(req), ctypes.byref(err))
    _lib.check(rc, err, what or name)
    return req.value


class _Poller:
    """Completes the Works of one communicator as their requests finish
    (mr_poll), so futures complete without anyone waiting. One thread per
    process group, started with the first Work."""

    def __init__(self, handle, name):
        self.handle = handle
        self.name = name
        self.lock = threading.Lock()
        self.pending = {}  # request handle -> Work
        self.thread = None
        self.stopped = False

    def register(self, issue, work):
        """Issues a request (issue() returns its handle) and registers it for
        work, both under the lock, so the poller cannot see the handle finish
        before it knows whose it is."""
        with self.lock:
            h = issue()
            self.pending[h] = work
            if self.thread is None and not self.stopped:
                self.thread = threading.Thread(target=self._run, name=f"multirail-poll-{self.name}", daemon=True)
                self.thread.start()
        return h

    def forget(self, h):
        with self.lock:
            self.pending.pop(h, None)

    def _run(self):
        try:
            L = _lib.lib()
        except Error:
            return
        arr = (_lib.mr_request * 64)()
        retry = []
        while not self.stopped and not _lib.forked():
            err = _lib.mr_error()
            n = L.mr_poll(self.handle, arr, 64, 10 if retry else POLL_MS, ctypes.byref(err))
            if n < 0:
                if n in (ERR_CLOSED, ERR_INVALID) or err.code in (ERR_CLOSED, ERR_INVALID):
                    # freed (mr_comm_free): the library failed its pending calls
                    self._fail_all(error_for(ERR_CLOSED, "multirail: the communicator was freed"))
                    return
                time.sleep(0.01)
                hs = []
            else:
                hs = list(arr[:n])
            hs += retry
            if _DEBUG and hs:
                _debug("polled", hs, "retry", retry)
            retry = []
            for h in hs:
                with self.lock:
                    w = self.pending.get(h)
                if w is not None and not w._collect(h):
                    retry.append(h)

    def _fail_all(self, exc):
        with self.lock:
            items = list(self.pending.items())
        for h, w in items:
            w._complete(h, exc=exc)

    def stop(self):
        self.stopped = True


class Work(dist._Work):
    """A multirail call in progress: one or more library requests, the tensors
    they use (kept referenced until done), a finishing step (copy-out of
    temporaries), the result list a future gets."""

    def __init__(self, pg, what, result=None, keep=None, after=None, recv=False):
        super().__init__()
        self._poller = pg._poller if pg is not None else None
        self._what = what
        self._result = result if result is not None else []
        self._keep = keep
        self._after = after
        self._recv = recv
        self._reqs = set()
        self._lock = threading.Lock()  # held while a request of this Work is waited on or tested
        self._flock = threading.Lock()  # future and completion state
        self._event = threading.Event()
        self._finishing = False
        self._armed = False
        self._resurrected = False
        self._exc = None
        self._fut = None
        self._base = None
        self._settled = False
        self._source = -1
        self._started = time.monotonic()

    # -- issuing

    def _issue(self, name, *args):
        self._poller.register(lambda: self._add(_lib_call(name, self._poller.handle, *args, what=self._what)), self)

    def _add(self, h):
        self._reqs.add(h)
        if _DEBUG:
            _debug("issued", self._what, h, [tuple(t.shape) if isinstance(t, torch.Tensor) else "list" for t in self._result])
        return h

    def _arm(self):
        """Called once every request is issued: from now on the Work finishes
        when its last request does (at once when it has none)."""
        with self._lock:
            self._armed = True
            fin = not self._reqs and not self._finishing
            if fin:
                self._finishing = True
        if fin:
            self._finish()
        return self

    # -- completion

    def _complete_locked(self, h, rc=0, err=None, st=None, exc=None):
        """Records request h's result (self._lock held); True when this was the
        last one and the caller must call _finish()."""
        if h not in self._reqs:
            return False
        self._reqs.discard(h)
        if self._poller is not None:
            self._poller.forget(h)
        if exc is None and rc < 0:
            exc = error_for(err.code or rc, err.msg.decode("utf-8", "replace") or _lib.strerror(rc))
        if exc is not None and self._exc is None:
            if not str(exc).startswith("multirail"):
                exc = type(exc)(getattr(exc, "code", -11), f"multirail: {self._what}: {exc}")
            self._exc = exc
        if st is not None and self._recv:
            self._source = st.source
        if self._armed and not self._reqs and not self._finishing:
            self._finishing = True
            return True
        return False

    def _complete(self, h, exc):
        with self._lock:
            fin = self._complete_locked(h, exc=exc)
        if fin:
            self._finish()

    def _collect(self, h):
        """The poller's: collects finished request h unless a waiter holds this
        Work (then returns False: try again)."""
        if not self._lock.acquire(blocking=False):
            return False
        fin = False
        try:
            if h not in self._reqs:
                return True
            err, st, done = _lib.mr_error(), _lib.mr_status(), ctypes.c_int(0)
            rc = _lib.lib().mr_test(h, ctypes.byref(done), ctypes.byref(st), ctypes.byref(err))
            if rc >= 0 and not done.value:
                return False
            fin = self._complete_locked(h, rc, err, st)
        finally:
            self._lock.release()
        if fin:
            self._finish()
        return True

    def _finish(self):
        if _DEBUG:
            _debug("finished", self._what, self._exc)
        if self._exc is None and self._after is not None:
            try:
                with torch.no_grad():
                    self._after()
            except Exception as e:  # a copy-out failed
                self._exc = e
        self._after = None
        self._keep = None
        self._event.set()
        self._settle()

    def _settle(self):
        with self._flock:
            base = self._base
            if base is None or self._settled or not self._event.is_set():
                return
            self._settled = True
        if self._exc is not None:
            base.set_exception(self._exc)
        else:
            base.set_result(self.result())

    # -- torch's Work API

    def wait(self, timeout=None):
        """Waits until done; raises the call's error (a multirail.Error, which is
        a RuntimeError). timeout: a timedelta or seconds (0/None: no limit; then
        multirail.TimeoutError and the call goes on). Waits in slices of 50 ms,
        so Ctrl-C raises KeyboardInterrupt within ~50 ms."""
        if isinstance(timeout, datetime.timedelta):
            timeout = timeout.total_seconds()
        deadline = time.monotonic() + timeout if timeout else None
        L = None
        while not self._event.is_set():
            if deadline is not None and time.monotonic() >= deadline:
                raise error_for(ERR_TIMEOUT, f"multirail: {self._what}: not finished after {timeout:g} s")
            reqs = list(self._reqs)
            if not reqs:
                self._event.wait(WAIT_SLICE_MS / 1000)  # being finished by the poller
                continue
            if not self._lock.acquire(timeout=WAIT_SLICE_MS / 1000):
                continue
            fin = False
            try:
                h = reqs[0]
                if h in self._reqs:
                    if L is None:
                        L = _lib.lib()
                    err, st = _lib.mr_error(), _lib.mr_status()
                    rc = L.mr_wait(h, WAIT_SLICE_MS, ctypes.byref(st), ctypes.byref(err))
                    if rc != ERR_TIMEOUT:
                        fin = self._complete_locked(h, rc, err, st)
            finally:
                self._lock.release()
            if fin:
                self._finish()
        if self._exc is not None:
            raise self._exc
        return True

    def get_future(self):
        """A torch.futures.Future completed (by the poller thread) with the
        call's output tensors, or with its error."""
        with self._flock:
            if self._fut is None:
                # torch 1.13's Future.set_exception stores the exception as the
                # value (raised only by Python's wait/value): C++ consumers such
                # as DDP's reducer would take it for the result and crash. A
                # then() whose callback raises marks the child future with a
                # real C++ error (RuntimeError "Got the following error when
                # running the callback: <the library's error>").
                self._base = torch.futures.Future()
                self._fut = self._base.then(_unwrap)
            fut = self._fut
        self._settle()
        return fut

    def is_completed(self):
        return self._event.is_set()

    def is_success(self):
        return self._event.is_set() and self._exc is None

    def exception(self):
        return self._exc

    def result(self):
        """The output tensors."""
        return _strong(self._result)

    def __del__(self):
        # Python dropped this Work: C++ may still hold it (see _retained).
        try:
            if not self._resurrected:
                self._resurrected = True
                self._result = _weak(self._result)
                if self._event.is_set():  # a later get_future() makes a new, settled one
                    with self._flock:
                        self._fut = self._base = None
                        self._settled = False
                _retained.append(self)
        except Exception:  # noqa: BLE001 (interpreter shutdown)
            pass

    def source_rank(self):
        if not self._recv:
            raise RuntimeError("multirail: source_rank is only available on receives from any source")
        return self._source

    _source_rank = source_rank
    sourceRank = source_rank

    def synchronize(self):
        pass

    def __repr__(self):
        state = "done" if self._event.is_set() else "pending"
        return f"<multirail.torch.Work {self._what} {state}>"


def _unwrap(f):
    return f.value()  # raises the Work's error


# torch 1.13's trampoline keeps no reference to the Python half of a Work it
# hands to C++ (DDP's reducer, _broadcast_coalesced, ...): once Python drops
# it, C++ calls of wait() and getFuture() reach the base class, whose wait
# never returns (torch 2.x wraps such Works in PyWorkHolder). So a Work that
# Python drops is resurrected by its __del__ into this ring, its outputs then
# held weakly (their owners keep them), and lives on for the next _RETAIN
# dropped Works.
_RETAIN = 4096
_retained = collections.deque(maxlen=_RETAIN)


def _weak(x):
    if isinstance(x, torch.Tensor):
        return weakref.ref(x)
    if isinstance(x, (list, tuple)):
        return [_weak(y) for y in x]
    return x


def _strong(x):
    if isinstance(x, weakref.ref):
        return x()
    if isinstance(x, list):
        return [y for y in (_strong(z) for z in x) if y is not None]
    return x


def _lossy_json(error_feedback, packet_floats):
    return _mr.lossy_opts(error_feedback, packet_floats)


def _one(tensors, what):
    if isinstance(tensors, torch.Tensor):
        return tensors
    if len(tensors) != 1:
        raise InvalidError(-1, f"multirail: {what}: want one tensor per process, got {len(tensors)}")
    return tensors[0]


def _opt(opts, name, default):
    return getattr(opts, name, default) if opts is not None else default


def _check_same(ts, n, what):
    for t in ts:
        if t.numel() != n:
            raise InvalidError(
                -1, f"multirail: {what}: tensors of {t.numel()} and {n} elements; this call needs equal sizes"
            )


class ProcessGroupMultirail(dist.ProcessGroup):
    """A torch.distributed process group over a multirail communicator."""

    def __init__(self, comm, rank, size, name=""):
        super().__init__(rank, size)
        self._comm = comm
        self._rank = rank
        self._size = size
        self._group_name = name
        self._poller = _Poller(comm.handle, name or "world")
        self._coalescing = None
        self._seq = 0
        self._lossy_streams = set()

    # -- identity

    def getBackendName(self):
        return BACKEND

    def _get_backend_name(self):
        return BACKEND

    def name(self):
        return BACKEND

    def rank(self):
        return self._rank

    def size(self):
        return self._size

    def getRank(self):
        return self._rank

    def getSize(self):
        return self._size

    @property
    def comm(self):
        """The multirail.Comm under this group."""
        return self._comm

    def _set_sequence_number_for_group(self):
        pass

    def _get_sequence_number_for_group(self):
        return self._seq

    def abort(self, reason="aborted by torch"):
        """Tells every rank this one gives up (their calls fail with AbortedError)."""
        self._comm.abort(reason)

    def shutdown(self):
        """Frees the communicator (pending calls fail)."""
        self._poller.stop()
        self._comm.close()

    # -- helpers

    def _work(self, what, result=None, keep=None, after=None, recv=False):
        self._seq += 1
        _lib.check_fork()
        w = Work(self, what, result, keep, after, recv)
        if self._coalescing is not None:
            self._coalescing.append(w)
        return w

    # -- collectives

    def barrier(self, opts=None):
        w = self._work("barrier")
        w._issue("mr_ibarrier")
        return w._arm()

    def broadcast(self, tensors, opts=None):
        if isinstance(tensors, torch.Tensor):
            tensors = [tensors]
        root = _opt(opts, "rootRank", 0)
        ds = [_Dense(t, "broadcast") for t in tensors]
        w = self._work("broadcast", list(tensors), ds, lambda: [d.back() for d in ds])
        for d in ds:
            if d.count:
                w._issue("mr_ibcast", d.ptr, d.count, d.dt, root)
        return w._arm()

    def allreduce(self, tensors, opts=None):
        if isinstance(tensors, torch.Tensor):
            tensors = [tensors]
        op = reduce_op(_opt(opts, "reduceOp", None))
        if len(tensors) != 1:
            return self.allreduce_coalesced(tensors, opts)
        d = _Dense(tensors[0], "allreduce", op)
        w = self._work("allreduce", list(tensors), d, d.back)
        if d.count:
            w._issue("mr_iallreduce", d.ptr, d.ptr, d.count, d.dt, op)
        return w._arm()

    def allreduce_coalesced(self, tensors, opts=None):
        """Each tensor reduced on its own, in one flat buffer (one call)."""
        op = reduce_op(_opt(opts, "reduceOp", None))
        tensors = list(tensors)
        if not tensors:
            return self._work("allreduce_coalesced")._arm()
        dts = {t.dtype for t in tensors}
        if len(dts) != 1:
            raise InvalidError(-1, f"multirail: allreduce_coalesced: tensors of several dtypes {sorted(map(str, dts))}")
        for t in tensors:
            _Dense(t, "allreduce_coalesced", op)  # checks device and dtype
        flat = torch.cat([t.reshape(-1) for t in tensors]) if len(tensors) > 1 else tensors[0].reshape(-1).clone()
        d = _Dense(flat, "allreduce_coalesced", op)

        def after():
            off = 0
            for t in tensors:
                n = t.numel()
                t.copy_(flat[off : off + n].view(t.shape))
                off += n

        w = self._work("allreduce_coalesced", tensors, (d, flat), after)
        if d.count:
            w._issue("mr_iallreduce", d.ptr, d.ptr, d.count, d.dt, op)
        return w._arm()

    def reduce(self, tensors, opts=None):
        t = _one(tensors, "reduce")
        op = reduce_op(_opt(opts, "reduceOp", None))
        root = _opt(opts, "rootRank", 0)
        d = _Dense(t, "reduce", op)
        w = self._work("reduce", [t], d, d.back)
        if d.count:
            w._issue("mr_ireduce", d.ptr, d.ptr, d.count, d.dt, op, root)
        return w._arm()

    def allgather(self, output_tensors, input_tensors, opts=None):
        inp = _one(input_tensors, "allgather")
        outs = output_tensors[0] if output_tensors and isinstance(output_tensors[0], (list, tuple)) else output_tensors
        if len(output_tensors) != 1 and output_tensors and isinstance(output_tensors[0], (list, tuple)):
            raise InvalidError(-1, "multirail: allgather: want one output list per process")
        if len(outs) != self._size:
            raise InvalidError(-1, f"multirail: allgather: {len(outs)} output tensors for {self._size} ranks")
        n = inp.numel()
        _check_same(outs, n, "allgather")
        src = _Dense(inp, "allgather")
        for o in outs:
            if o.dtype != inp.dtype:
                raise InvalidError(-1, f"multirail: allgather: output dtype {o.dtype} differs from input's {inp.dtype}")
        tmp = torch.empty(self._size * n, dtype=inp.dtype)
        dst = _Dense(tmp, "allgather")

        def after():
            for r, o in enumerate(outs):
                o.copy_(tmp[r * n : (r + 1) * n].view(o.shape))

        w = self._work("allgather", [list(outs)], (src, dst), after)
        if n:
            w._issue("mr_iallgather", src.ptr, dst.ptr, src.count, src.dt)
        return w._arm()

    def _allgather_base(self, output, input, opts=None):
        n = input.numel()
        if output.numel() != n * self._size:
            raise InvalidError(
                -1, f"multirail: allgather_into_tensor: output has {output.numel()} elements, want size*input = {n * self._size}"
            )
        if output.dtype != input.dtype:
            raise InvalidError(-1, f"multirail: allgather_into_tensor: output dtype {output.dtype} differs from input's {input.dtype}")
        src = _Dense(input, "allgather_into_tensor")
        dst = _Dense(output, "allgather_into_tensor")
        w = self._work("allgather_into_tensor", [output], (src, dst), dst.back)
        if n:
            w._issue("mr_iallgather", src.ptr, dst.ptr, src.count, src.dt)
        return w._arm()

    all_gather_single = _allgather_base
    _all_gather_base = _allgather_base

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        if len(outputs) != len(inputs):
            raise InvalidError(-1, "multirail: allgather_into_tensor_coalesced: as many outputs as inputs, please")
        pairs = []
        for o, i in zip(outputs, inputs):
            if o.numel() != i.numel() * self._size:
                raise InvalidError(-1, "multirail: allgather_into_tensor_coalesced: an output is not size times its input")
            pairs.append((_Dense(i, "allgather_into_tensor_coalesced"), _Dense(o, "allgather_into_tensor_coalesced")))
        w = self._work("allgather_into_tensor_coalesced", list(outputs), pairs, lambda: [d.back() for _, d in pairs])
        for s, d in pairs:
            if s.count:
                w._issue("mr_iallgather", s.ptr, d.ptr, s.count, s.dt)
        return w._arm()

    all_gather_single_coalesced = allgather_into_tensor_coalesced
    all_gather_into_tensor_coalesced = allgather_into_tensor_coalesced

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        """output_lists[r][i] gets rank r's input_list[i] (one flat allgather)."""
        input_list = list(input_list)
        if len(output_lists) != self._size:
            raise InvalidError(-1, f"multirail: allgather_coalesced: {len(output_lists)} output lists for {self._size} ranks")
        dts = {t.dtype for t in input_list}
        if len(dts) > 1:
            raise InvalidError(-1, "multirail: allgather_coalesced: inputs of several dtypes")
        if not input_list:
            return self._work("allgather_coalesced", list(output_lists))._arm()
        sizes = [t.numel() for t in input_list]
        for r, outs in enumerate(output_lists):
            if [o.numel() for o in outs] != sizes:
                raise InvalidError(-1, f"multirail: allgather_coalesced: output list {r} does not match the inputs' sizes")
        flat = torch.cat([t.reshape(-1) for t in input_list])
        total = flat.numel()
        tmp = torch.empty(self._size * total, dtype=flat.dtype)
        src, dst = _Dense(flat, "allgather_coalesced"), _Dense(tmp, "allgather_coalesced")

        def after():
            for r, outs in enumerate(output_lists):
                off = r * total
                for o, n in zip(outs, sizes):
                    o.copy_(tmp[off : off + n].view(o.shape))
                    off += n

        w = self._work("allgather_coalesced", list(output_lists), (src, dst, flat), after)
        if total:
            w._issue("mr_iallgather", src.ptr, dst.ptr, total, src.dt)
        return w._arm()

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        out = _one(output_tensors, "reduce_scatter")
        ins = input_tensors[0] if input_tensors and isinstance(input_tensors[0], (list, tuple)) else input_tensors
        if len(ins) != self._size:
            raise InvalidError(-1, f"multirail: reduce_scatter: {len(ins)} input tensors for {self._size} ranks")
        op = reduce_op(_opt(opts, "reduceOp", None))
        n = out.numel()
        _check_same(ins, n, "reduce_scatter")
        flat = torch.cat([t.reshape(-1) for t in ins])
        src, dst = _Dense(flat, "reduce_scatter", op), _Dense(out, "reduce_scatter", op)
        w = self._work("reduce_scatter", [out], (src, dst, flat), dst.back)
        if n:
            w._issue("mr_ireduce_scatter", src.ptr, dst.ptr, dst.count, src.dt, op)
        return w._arm()

    def _reduce_scatter_base(self, output, input, opts=None):
        op = reduce_op(_opt(opts, "reduceOp", None))
        n = output.numel()
        if input.numel() != n * self._size:
            raise InvalidError(
                -1, f"multirail: reduce_scatter_tensor: input has {input.numel()} elements, want size*output = {n * self._size}"
            )
        src, dst = _Dense(input, "reduce_scatter_tensor", op), _Dense(output, "reduce_scatter_tensor", op)
        w = self._work("reduce_scatter_tensor", [output], (src, dst), dst.back)
        if n:
            w._issue("mr_ireduce_scatter", src.ptr, dst.ptr, dst.count, src.dt, op)
        return w._arm()

    reduce_scatter_single = _reduce_scatter_base
    reduce_scatter_tensor = _reduce_scatter_base

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        op = reduce_op(_opt(opts, "reduceOp", None))
        if len(outputs) != len(inputs):
            raise InvalidError(-1, "multirail: reduce_scatter_tensor_coalesced: as many outputs as inputs, please")
        pairs = []
        for o, i in zip(outputs, inputs):
            if i.numel() != o.numel() * self._size:
                raise InvalidError(-1, "multirail: reduce_scatter_tensor_coalesced: an input is not size times its output")
            pairs.append((_Dense(i, "reduce_scatter_tensor_coalesced", op), _Dense(o, "reduce_scatter_tensor_coalesced", op)))
        w = self._work("reduce_scatter_tensor_coalesced", list(outputs), pairs, lambda: [d.back() for _, d in pairs])
        for s, d in pairs:
            if d.count:
                w._issue("mr_ireduce_scatter", s.ptr, d.ptr, d.count, s.dt, op)
        return w._arm()

    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced

    def gather(self, output_tensors, input_tensors, opts=None):
        inp = _one(input_tensors, "gather")
        root = _opt(opts, "rootRank", 0)
        n = inp.numel()
        src = _Dense(inp, "gather")
        outs = []
        if self._rank == root:
            outs = output_tensors[0] if output_tensors and isinstance(output_tensors[0], (list, tuple)) else output_tensors
            if len(outs) != self._size:
                raise InvalidError(-1, f"multirail: gather: {len(outs)} output tensors on the root for {self._size} ranks")
            _check_same(outs, n, "gather")
            tmp = torch.empty(self._size * n, dtype=inp.dtype)
        else:
            tmp = torch.empty(0, dtype=inp.dtype)
        dst = _Dense(tmp, "gather")

        def after():
            for r, o in enumerate(outs):
                o.copy_(tmp[r * n : (r + 1) * n].view(o.shape))

        w = self._work("gather", [list(outs)] if outs else [], (src, dst), after)
        if n:
            w._issue("mr_igather", src.ptr, dst.ptr if self._rank == root else 0, n, src.dt, root)
        return w._arm()

    def scatter(self, output_tensors, input_tensors, opts=None):
        out = _one(output_tensors, "scatter")
        root = _opt(opts, "rootRank", 0)
        n = out.numel()
        dst = _Dense(out, "scatter")
        if self._rank == root:
            ins = input_tensors[0] if input_tensors and isinstance(input_tensors[0], (list, tuple)) else input_tensors
            if len(ins) != self._size:
                raise InvalidError(-1, f"multirail: scatter: {len(ins)} input tensors on the root for {self._size} ranks")
            _check_same(ins, n, "scatter")
            flat = torch.cat([t.reshape(-1) for t in ins]).to(out.dtype)
        else:
            flat = torch.empty(0, dtype=out.dtype)
        src = _Dense(flat, "scatter")
        w = self._work("scatter", [out], (src, dst, flat), dst.back)
        if n:
            w._issue("mr_iscatter", src.ptr if self._rank == root else 0, dst.ptr, n, dst.dt, root)
        return w._arm()

    def _alltoallv(self, what, src, sendcounts, dst, recvcounts, result, keep, after):
        sd = [0] * self._size
        rd = [0] * self._size
        for i in range(1, self._size):
            sd[i] = sd[i - 1] + sendcounts[i - 1]
            rd[i] = rd[i - 1] + recvcounts[i - 1]
        arrs = [_mr._i64s(x) for x in (sendcounts, sd, recvcounts, rd)]
        w = self._work(what, result, (keep, arrs, src, dst), after)
        if sum(sendcounts) or sum(recvcounts):
            w._issue("mr_ialltoallv", src.ptr, arrs[0], arrs[1], dst.ptr, arrs[2], arrs[3], src.dt)
        return w._arm()

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        """all_to_all_single: even (no splits) or uneven splits along dim 0."""
        if output.dtype != input.dtype:
            raise InvalidError(-1, f"multirail: all_to_all_single: output dtype {output.dtype} differs from input's {input.dtype}")
        src, dst = _Dense(input, "all_to_all_single"), _Dense(output, "all_to_all_single")
        osz, isz = list(output_split_sizes or []), list(input_split_sizes or [])
        if not osz and not isz:
            if input.numel() != output.numel() or input.numel() % self._size:
                raise InvalidError(
                    -1,
                    f"multirail: all_to_all_single: {input.numel()} and {output.numel()} elements; without splits both must be the same multiple of {self._size}",
                )
            n = input.numel() // self._size
            w = self._work("all_to_all_single", [output], (src, dst), dst.back)
            if n:
                w._issue("mr_ialltoall", src.ptr, dst.ptr, n, src.dt)
            return w._arm()

        def counts(t, splits, which):
            rows = t.shape[0] if t.dim() else 1
            row = t.numel() // rows if rows else 0
            if not splits:
                if rows % self._size:
                    raise InvalidError(-1, f"multirail: all_to_all_single: {which} has {rows} rows, not a multiple of {self._size}")
                splits = [rows // self._size] * self._size
            if len(splits) != self._size or sum(splits) != rows:
                raise InvalidError(-1, f"multirail: all_to_all_single: {which} splits {splits} do not cover {rows} rows in {self._size} parts")
            return [int(s) * row for s in splits]

        sc, rc = counts(input, isz, "input"), counts(output, osz, "output")
        return self._alltoallv("all_to_all_single", src, sc, dst, rc, [output], None, dst.back)

    all_to_all_single = alltoall_base

    def alltoall(self, output_tensors, input_tensors, opts=None):
        """all_to_all: input_tensors[j] goes to rank j, output_tensors[j] comes from rank j (sizes may differ)."""
        if len(input_tensors) != self._size or len(output_tensors) != self._size:
            raise InvalidError(-1, f"multirail: all_to_all: want {self._size} input and output tensors")
        dts = {t.dtype for t in list(input_tensors) + list(output_tensors)}
        if len(dts) != 1:
            raise InvalidError(-1, "multirail: all_to_all: tensors of several dtypes")
        for t in list(input_tensors) + list(output_tensors):
            _Dense(t, "all_to_all")  # checks
        flat = torch.cat([t.reshape(-1) for t in input_tensors])
        sc = [t.numel() for t in input_tensors]
        rc = [t.numel() for t in output_tensors]
        tmp = torch.empty(sum(rc), dtype=flat.dtype)
        src, dst = _Dense(flat, "all_to_all"), _Dense(tmp, "all_to_all")

        def after():
            off = 0
            for o, n in zip(output_tensors, rc):
                o.copy_(tmp[off : off + n].view(o.shape))
                off += n

        if len(set(sc)) == 1 and sc == rc:
            w = self._work("all_to_all", list(output_tensors), (src, dst, flat, tmp), after)
            if sc[0]:
                w._issue("mr_ialltoall", src.ptr, dst.ptr, sc[0], src.dt)
            return w._arm()
        return self._alltoallv("all_to_all", src, sc, dst, rc, list(output_tensors), (flat, tmp), after)

    # -- point to point

    def send(self, tensors, dstRank, tag=0):
        t = _one(tensors, "send")
        d = _Dense(t, "send")
        w = self._work("send", [t], d)
        if d.nbytes:
            w._issue("mr_isend", d.ptr, d.nbytes, int(dstRank), int(tag))
        return w._arm()

    def recv(self, tensors, srcRank, tag=0):
        t = _one(tensors, "recv")
        d = _Dense(t, "recv")
        w = self._work("recv", [t], d, d.back, recv=True)
        w._source = int(srcRank)
        if d.nbytes:
            w._issue("mr_irecv", d.ptr, d.nbytes, int(srcRank), int(tag))
        return w._arm()

    def recv_anysource(self, tensors, tag=0):
        t = _one(tensors, "recv_anysource")
        d = _Dense(t, "recv_anysource")
        w = self._work("recv from any source", [t], d, d.back, recv=True)
        if not d.nbytes:
            raise InvalidError(-1, "multirail: recv from any source into an empty tensor: the sender cannot be known")
        w._issue("mr_irecv", d.ptr, d.nbytes, _lib.ANY_SOURCE, int(tag))
        return w._arm()

    # -- coalescing (batch_isend_irecv; 2.x's _coalescing_manager)

    def _start_coalescing(self, *args):
        self._coalescing = []

    start_coalescing = _start_coalescing

    def _end_coalescing(self, *args):
        works, self._coalescing = self._coalescing or [], None
        if args and isinstance(args[0], list):  # 1.13: the requests were returned one by one
            return None
        return _AllWork(self, works)

    end_coalescing = _end_coalescing

    def monitored_barrier(self, timeout=None, wait_all_ranks=False):
        return self.barrier().wait(timeout)

    # -- loss-tolerant allreduce (float32, in place)

    def lossy_allreduce(self, tensor, stream=0, op="avg", error_feedback=False, packet_floats=None):
        """The loss-tolerant allreduce of a float32 CPU tensor in place; returns a Work."""
        if tensor.dtype != torch.float32:
            raise InvalidError(-1, f"multirail: lossy allreduce takes float32, got {tensor.dtype}")
        d = _Dense(tensor, "lossy allreduce")
        self._lossy_streams.add(int(stream))
        w = self._work("lossy allreduce", [tensor], d, d.back)
        if d.count:
            w._issue("mr_ilossy_allreduce", d.ptr, d.count, _mr.op_code(op), int(stream), _lossy_json(error_feedback, packet_floats))
        return w._arm()

    def lossy_report(self, stream, quality):
        self._comm.lossy_report(stream, quality)

    def lossy_stats(self, stream=0):
        return self._comm.lossy_stats(stream)


class _AllWork(Work):
    """Done when every one of several Works is (2.x's end_coalescing)."""

    def __init__(self, pg, works):
        super().__init__(None, "coalesced", [t for w in works for t in w._result])
        self._works = works
        self._event.set()

    def wait(self, timeout=None):
        for w in self._works:
            w.wait(timeout)
        return True

    def is_completed(self):
        return all(w.is_completed() for w in self._works)

    def get_future(self):
        futs = [w.get_future() for w in self._works]
        res = self._result
        if not futs:
            out = torch.futures.Future()
            out.set_result(res)
            return out

        def done(f):
            for x in f.value():
                x.value()  # raises the first error (as a real C++ error of the returned future)
            return res

        return torch.futures.collect_all(futs).then(done)


# ---------------------------------------------------------------- bootstrap

_world = {"comm": None, "pg": None}
_comms = []  # every communicator this process made, in order (freed in reverse at exit)
_comms_lock = threading.Lock()


def world_comm():
    """The multirail.Comm of the default "multirail" process group (None if none)."""
    return _world["comm"]


def _remember(c):
    with _comms_lock:
        _comms.append(c)
    return c


@atexit.register
def _free_all():
    if _lib.forked():
        return
    with _comms_lock:
        cs = list(reversed(_comms))
        _comms.clear()
    for c in cs:
        try:
            c.close()
        except Exception:  # noqa: BLE001 (exiting)
            pass


class Options:
    """pg_options for dist.init_process_group("multirail", pg_options=...) and
    dist.new_group(..., pg_options=...): config is a dict of mr_prepare's
    config_json keys (capi/multirail.h: "ifname", "emu", "scheduler",
    "timeout", "algorithms", "insecure", "loopback_rails", "busy_poll",
    "lossy_reliable", "lossy_fixed_rate", ...). It applies to groups that
    meet through the store (the default group, or any group when the default
    group is not multirail's); a group made from the world communicator
    shares the world's configuration."""

    def __init__(self, config=None):
        self.config = dict(config or {})


def _config(backend_opts):
    """MULTIRAIL_TORCH_CONFIG (a JSON object) overlaid with pg_options' config."""
    cfg = {}
    env = os.environ.get("MULTIRAIL_TORCH_CONFIG")
    if env:
        try:
            cfg.update(json.loads(env))
        except ValueError as e:
            raise ConfigError(-2, f"multirail: MULTIRAIL_TORCH_CONFIG={env!r} is not a JSON object: {e}") from None
    extra = getattr(backend_opts, "config", None)
    if isinstance(extra, dict):
        cfg.update(extra)
    return cfg


def _store_bootstrap(store, rank, size, timeout, config=None):
    """Meets through torch's store: the token (MULTIRAIL_TOKEN, else rank 0
    draws one into the store), every rank's card, then connects."""
    if isinstance(timeout, datetime.timedelta):
        wait = timeout
    else:
        wait = datetime.timedelta(seconds=float(timeout or 1800))
    tok = os.environ.get("MULTIRAIL_TOKEN") or None
    if tok is None:
        if rank == 0:
            tok = _mr.new_token()
            store.set("multirail/token", tok)
        else:
            store.wait(["multirail/token"], wait)
            tok = store.get("multirail/token").decode()
    p = _mr.prepare(rank, size, token=tok, config=config or None)
    try:
        store.set(f"multirail/card/{rank}", p.card)
        keys = [f"multirail/card/{r}" for r in range(size)]
        store.wait(keys, wait)
        cards = [store.get(k) for k in keys]
    except BaseException:
        p.free()
        raise
    return p.connect(cards)


def _create(common_opts, backend_opts=None):
    """The backend creator (extended API): torch calls it on a group's members."""
    _lib.check_fork()
    store = common_opts.store
    rank = common_opts.group_rank
    size = common_opts.group_size
    timeout = getattr(common_opts, "timeout", None)
    name = str(getattr(common_opts, "group_id", "") or "")
    ranks = list(getattr(common_opts, "global_ranks_in_group", []) or [])
    world = _world["comm"]
    default = _default_group_is_ours()
    if ranks and world is not None and default and not world._closed:
        if world.rank not in ranks:
            raise InvalidError(-1, f"multirail: group {name!r}: rank {world.rank} is not among {ranks}")
        c = _remember(world.group(ranks, key=f"torch/{name}"))
        if c.rank != rank or c.size != size:
            raise InvalidError(-1, f"multirail: group {name!r}: made rank {c.rank} of {c.size}, torch says {rank} of {size}")
        return ProcessGroupMultirail(c, rank, size, name)
    c = _remember(_store_bootstrap(store, rank, size, timeout, _config(backend_opts)))
    pg = ProcessGroupMultirail(c, rank, size, name)
    if not ranks:  # the default group
        _world["comm"], _world["pg"] = c, pg
    return pg


def _default_group_is_ours():
    pg = _world["pg"]
    if pg is None:
        return False
    try:
        from torch.distributed import distributed_c10d as c10d

        cur = c10d._get_default_group()
    except Exception:  # noqa: BLE001 (no default group yet)
        return False
    return cur is pg


def _register():
    plugins = getattr(dist.Backend, "_plugins", {})
    if BACKEND.upper() in plugins:
        return
    kw = {"extended_api": True}
    try:
        params = inspect.signature(dist.Backend.register_backend).parameters
    except (TypeError, ValueError):
        params = {}
    if "devices" in params:
        kw["devices"] = ["cpu"]
    dist.Backend.register_backend(BACKEND, _create, **kw)


_register()


def init_process_group(backend=BACKEND, **kwargs):
    """dist.init_process_group for every launcher: under torchrun or env://
    (MASTER_ADDR set) it is dist.init_process_group(backend); under
    `multirail run` (MULTIRAIL_RANK, no MASTER_ADDR) the ranks meet in a
    FileStore named by MULTIRAIL_JOB_ID in the temporary directory (one host),
    and RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE are set for the program."""
    env = os.environ
    if "init_method" in kwargs or "store" in kwargs or env.get("MASTER_ADDR") or "MULTIRAIL_RANK" not in env:
        return dist.init_process_group(backend, **kwargs)
    rank, size = int(env["MULTIRAIL_RANK"]), int(env["MULTIRAIL_SIZE"])
    env.setdefault("RANK", str(rank))
    env.setdefault("WORLD_SIZE", str(size))
    env.setdefault("LOCAL_RANK", env.get("MULTIRAIL_LOCAL_RANK", str(rank)))
    env.setdefault("LOCAL_WORLD_SIZE", env.get("MULTIRAIL_LOCAL_SIZE", str(size)))
    job = env.get("MULTIRAIL_JOB_ID") or "job"
    path = os.path.join(tempfile.gettempdir(), f"multirail-torch-{job}")
    kwargs.setdefault("rank", rank)
    kwargs.setdefault("world_size", size)
    return dist.init_process_group(backend, init_method=f"file://{path}", **kwargs)


# ---------------------------------------------------------------- DDP hook


class LossTolerantState:
    """State of lossy_allreduce_hook (pass it to ddp.register_comm_hook).

    process_group   the group (None: the default group); the hook runs exact
                    allreduce when it is not a multirail group
    error_feedback  keep what was discarded and add it to the next step (per bucket)
    exact_steps     steps of exact allreduce first (DDP rebuilds its buckets
                    after step 1; the loss-tolerant state is per bucket)
    average_every   step(module) averages the parameters exactly every this
                    many steps (replicas drift where packets were discarded);
                    0: never
    packet_floats   floats per packet (None: the library's default)
    smoothing       weight of the newest loss in the smoothed loss whose
                    relative decrease is the quality report_loss reports
    stream_base     stream id of bucket 0 (bucket i is stream_base + i)
    """

    def __init__(
        self,
        process_group=None,
        error_feedback=False,
        exact_steps=10,
        average_every=50,
        packet_floats=None,
        smoothing=0.1,
        stream_base=0,
    ):
        if exact_steps < 1:
            raise ValueError("exact_steps must be >= 1: DDP rebuilds its buckets after the first step")
        if average_every < 0:
            raise ValueError("average_every must be >= 0")
        if not 0 < smoothing <= 1:
            raise ValueError("smoothing must be in (0, 1]")
        self.process_group = process_group
        self.error_feedback = bool(error_feedback)
        self.exact_steps = int(exact_steps)
        self.average_every = int(average_every)
        self.packet_floats = packet_floats
        self.smoothing = float(smoothing)
        self.stream_base = int(stream_base)
        self.iter = 0  # steps the hook has seen (counted at the last bucket)
        self.lossy_calls = 0
        self.exact_calls = 0
        self.averages = 0
        self._last_average = 0
        self._ema = None
        self._streams = set()
        self.last_quality = None

    def _group(self):
        pg = self.process_group
        if pg is None:
            from torch.distributed import distributed_c10d as c10d

            pg = c10d._get_default_group()
        return pg

    def report_loss(self, loss):
        """Feeds the quality signal: call once per step with the step's loss
        (a float or a tensor). The quality of the last loss-tolerant result of
        every bucket is the relative decrease of the smoothed loss."""
        loss = float(loss.detach().item() if isinstance(loss, torch.Tensor) else loss)
        if self._ema is None:
            self._ema = loss
            return None
        prev = self._ema
        self._ema += self.smoothing * (loss - self._ema)
        q = (prev - self._ema) / max(abs(prev), 1e-9)
        self.last_quality = q
        pg = self._group()
        if isinstance(pg, ProcessGroupMultirail):
            for s in sorted(self._streams):
                pg.lossy_report(s, q)
        return q

    def stats(self, per_stream=False):
        """The library's loss-tolerant counters summed over the buckets
        (packets, discarded, received, missing); per_stream: {stream: counters} too."""
        pg = self._group()
        tot = {"packets": 0, "discarded": 0, "received": 0, "missing": 0}
        per = {}
        if isinstance(pg, ProcessGroupMultirail):
            for s in sorted(self._streams):
                st = pg.lossy_stats(s)
                per[s] = st
                for k in tot:
                    tot[k] += st[k]
        tot["lossy_calls"] = self.lossy_calls
        tot["exact_calls"] = self.exact_calls
        tot["averages"] = self.averages
        if per_stream:
            tot["streams"] = per
        return tot

    @torch.no_grad()
    def average_parameters(self, module):
        """Averages module's parameters over the group now (exact allreduce),
        so every replica holds the same values."""
        pg = self._group()
        params = [p for p in module.parameters()]
        by_dtype = {}
        for p in params:
            by_dtype.setdefault(p.dtype, []).append(p)
        n = pg.size()
        for ps in by_dtype.values():
            flat = torch.cat([p.detach().reshape(-1) for p in ps])
            dist.all_reduce(flat, group=self.process_group)
            flat.div_(n)
            off = 0
            for p in ps:
                k = p.numel()
                p.copy_(flat[off : off + k].view(p.shape))
                off += k
        self.averages += 1
        self._last_average = self.iter

    def step(self, module):
        """Call once per training step after optimizer.step(): averages the
        parameters when average_every loss-tolerant steps have passed since the
        last averaging. Returns True when it averaged."""
        if self.average_every and self.iter > self.exact_steps and self.iter - self._last_average >= self.average_every:
            self.average_parameters(module)
            return True
        return False


def lossy_allreduce_hook(state, bucket):
    """A DDP communication hook: the loss-tolerant allreduce (average) of each
    float32 bucket on the bucket's own stream; exact allreduce for the first
    state.exact_steps steps, for other dtypes and on non-multirail groups."""
    pg = state._group()
    t = bucket.buffer() if hasattr(bucket, "buffer") else bucket.get_tensor()
    idx = bucket.index()
    lossy = state.iter >= state.exact_steps and t.dtype == torch.float32 and isinstance(pg, ProcessGroupMultirail)
    if bucket.is_last():
        state.iter += 1
    if not lossy:
        state.exact_calls += 1
        t.div_(pg.size())
        fut = dist.all_reduce(t, group=state.process_group, async_op=True).get_future()
        return fut.then(lambda f: f.value()[0])
    state.lossy_calls += 1
    stream = state.stream_base + idx
    state._streams.add(stream)
    w = pg.lossy_allreduce(t, stream=stream, op="avg", error_feedback=state.error_feedback, packet_floats=state.packet_floats)
    return w.get_future().then(lambda f: f.value()[0])
