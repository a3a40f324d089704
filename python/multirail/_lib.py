"""ctypes bindings of libmultirail.so (the C ABI in capi/multirail.h).

Nothing here is compiled: the library is found at run time, in this order:
  1. the MULTIRAIL_LIB environment variable (a path to libmultirail.so);
  2. libmultirail.so next to this file (scripts/build-python.sh copies it
     into the installed package);
  3. build/libmultirail.so of the source checkout this file lives in
     (python/multirail/_lib.py -> ../../build/libmultirail.so).

Every call that can fail raises a multirail.Error subclass carrying the
library's code and message (see multirail.errors). After fork() every call
in the child raises ForkError at once: the Go runtime in the library does not
survive fork (golang/go#15538), and the C side returns MR_ERR_FORK too.
"""

import ctypes
import os
import threading

from .errors import ERR_FORK, ConfigError, Error, ForkError, error_for

# enum mr_dtype
UINT8, INT8, BOOL, INT32, INT64, FLOAT16, BFLOAT16, FLOAT32, FLOAT64 = range(9)
DTYPE_NAMES = ("uint8", "int8", "bool", "int32", "int64", "float16", "bfloat16", "float32", "float64")
DTYPE_SIZES = (1, 1, 1, 4, 8, 2, 2, 4, 8)
# enum mr_op
SUM, PROD, MIN, MAX, AVG, BAND, BOR, BXOR = range(8)
OP_NAMES = ("sum", "prod", "min", "max", "avg", "band", "bor", "bxor")

ANY_SOURCE = -1
ANY_TAG = -1
MAX_TAG = 1 << 30
CARD_MAX = 65536

mr_comm = ctypes.c_int64
mr_pending = ctypes.c_int64
mr_request = ctypes.c_int64


class mr_error(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int32), ("msg", ctypes.c_char * 1024)]


class mr_status(ctypes.Structure):
    _fields_ = [("source", ctypes.c_int32), ("tag", ctypes.c_int32), ("bytes", ctypes.c_int64)]


class mr_lossy_stats(ctypes.Structure):
    _fields_ = [
        ("packets", ctypes.c_int64),
        ("discarded", ctypes.c_int64),
        ("received", ctypes.c_int64),
        ("missing", ctypes.c_int64),
    ]


_p = ctypes.c_void_p
_i = ctypes.c_int
_i32 = ctypes.c_int32
_i64 = ctypes.c_int64
_s = ctypes.c_char_p
_E = ctypes.POINTER(mr_error)
_R = ctypes.POINTER(mr_request)
_ST = ctypes.POINTER(mr_status)
_I64P = ctypes.POINTER(ctypes.c_int64)

# name: (restype, argtypes). Every function here but mr_strerror, mr_comm_rank
# and mr_comm_size returns 0 or a negative code and takes an mr_error* last.
_SIGNATURES = {
    "mr_strerror": (_s, [_i]),
    "mr_init_env": (_i, [_s, ctypes.POINTER(mr_comm), _E]),
    "mr_new_token": (_i, [ctypes.c_char_p, _i64, _E]),
    "mr_prepare": (_i, [_s, _i, _i, _s, ctypes.POINTER(mr_pending), _E]),
    "mr_pending_card": (_i64, [mr_pending, ctypes.c_char_p, _i64, _E]),
    "mr_connect": (_i, [mr_pending, ctypes.POINTER(ctypes.c_char_p), _I64P, ctypes.POINTER(mr_comm), _E]),
    "mr_pending_free": (_i, [mr_pending, _E]),
    "mr_comm_rank": (_i, [mr_comm]),
    "mr_comm_size": (_i, [mr_comm]),
    "mr_comm_group": (_i, [mr_comm, ctypes.POINTER(ctypes.c_int32), _i32, _s, ctypes.POINTER(mr_comm), _E]),
    "mr_comm_free": (_i, [mr_comm, _E]),
    "mr_abort": (_i, [mr_comm, _s, _E]),
    "mr_barrier": (_i, [mr_comm, _E]),
    "mr_bcast": (_i, [mr_comm, _p, _i64, _i, _i, _E]),
    "mr_reduce": (_i, [mr_comm, _p, _p, _i64, _i, _i, _i, _E]),
    "mr_allreduce": (_i, [mr_comm, _p, _p, _i64, _i, _i, _E]),
    "mr_allgather": (_i, [mr_comm, _p, _p, _i64, _i, _E]),
    "mr_reduce_scatter": (_i, [mr_comm, _p, _p, _i64, _i, _i, _E]),
    "mr_alltoall": (_i, [mr_comm, _p, _p, _i64, _i, _E]),
    "mr_alltoallv": (_i, [mr_comm, _p, _I64P, _I64P, _p, _I64P, _I64P, _i, _E]),
    "mr_gather": (_i, [mr_comm, _p, _p, _i64, _i, _i, _E]),
    "mr_scatter": (_i, [mr_comm, _p, _p, _i64, _i, _i, _E]),
    "mr_send": (_i, [mr_comm, _p, _i64, _i, _i, _E]),
    "mr_recv": (_i, [mr_comm, _p, _i64, _i, _i, _ST, _E]),
    "mr_lossy_allreduce": (_i, [mr_comm, _p, _i64, _i, _i64, _s, _E]),
    "mr_lossy_report": (_i, [mr_comm, _i64, ctypes.c_double, _E]),
    "mr_lossy_stats": (_i, [mr_comm, _i64, ctypes.POINTER(mr_lossy_stats), _E]),
    "mr_ibarrier": (_i, [mr_comm, _R, _E]),
    "mr_ibcast": (_i, [mr_comm, _p, _i64, _i, _i, _R, _E]),
    "mr_ireduce": (_i, [mr_comm, _p, _p, _i64, _i, _i, _i, _R, _E]),
    "mr_iallreduce": (_i, [mr_comm, _p, _p, _i64, _i, _i, _R, _E]),
    "mr_iallgather": (_i, [mr_comm, _p, _p, _i64, _i, _R, _E]),
    "mr_ireduce_scatter": (_i, [mr_comm, _p, _p, _i64, _i, _i, _R, _E]),
    "mr_ialltoall": (_i, [mr_comm, _p, _p, _i64, _i, _R, _E]),
    "mr_ialltoallv": (_i, [mr_comm, _p, _I64P, _I64P, _p, _I64P, _I64P, _i, _R, _E]),
    "mr_igather": (_i, [mr_comm, _p, _p, _i64, _i, _i, _R, _E]),
    "mr_iscatter": (_i, [mr_comm, _p, _p, _i64, _i, _i, _R, _E]),
    "mr_isend": (_i, [mr_comm, _p, _i64, _i, _i, _R, _E]),
    "mr_irecv": (_i, [mr_comm, _p, _i64, _i, _i, _R, _E]),
    "mr_ilossy_allreduce": (_i, [mr_comm, _p, _i64, _i, _i64, _s, _R, _E]),
    "mr_test": (_i, [mr_request, ctypes.POINTER(ctypes.c_int), _ST, _E]),
    "mr_wait": (_i, [mr_request, _i64, _ST, _E]),
    "mr_poll": (_i, [mr_comm, _R, _i32, _i64, _E]),
    "mr_request_free": (_i, [mr_request, _E]),
}

_lock = threading.Lock()
_lib = None
_lib_path = None
_load_pid = os.getpid()
_forked = False


def _mark_forked():
    global _forked
    _forked = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_mark_forked)


def forked():
    """True in a child created by fork() after this module was imported."""
    return _forked or os.getpid() != _load_pid


def candidates():
    """The paths tried for libmultirail.so, in order."""
    out = []
    env = os.environ.get("MULTIRAIL_LIB")
    if env:
        out.append(env)
    here = os.path.dirname(os.path.abspath(__file__))
    out.append(os.path.join(here, "libmultirail.so"))
    out.append(os.path.normpath(os.path.join(here, "..", "..", "build", "libmultirail.so")))
    return out


def path():
    """The path of the loaded library (loads it if needed)."""
    lib()
    return _lib_path


def lib():
    """The loaded library, its functions typed. Raises ForkError in a forked
    child and Error(MR_ERR_CONFIG) when the library cannot be found."""
    global _lib, _lib_path
    check_fork()
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for p in candidates():
            if not os.path.exists(p):
                tried.append(f"{p} (absent)")
                continue
            try:
                L = ctypes.CDLL(p)
            except OSError as e:
                tried.append(f"{p} ({e})")
                if p == os.environ.get("MULTIRAIL_LIB"):
                    break
                continue
            missing = []
            for name, (res, args) in _SIGNATURES.items():
                try:
                    f = getattr(L, name)
                except AttributeError:
                    missing.append(name)
                    continue
                f.restype = res
                f.argtypes = args
            if missing:
                tried.append(f"{p} (lacks {', '.join(missing)})")
                continue
            _lib, _lib_path = L, p
            return _lib
        raise ConfigError(
            -2,
            "multirail: libmultirail.so not found or unusable; tried "
            + "; ".join(tried)
            + ". Build it with `sh scripts/build-capi.sh` (or `sh scripts/build-python.sh`), "
            "or set MULTIRAIL_LIB to its path.",
        )


def check_fork():
    if forked():
        raise ForkError(
            ERR_FORK,
            "multirail: called in a process created by fork() (pid %d, library loaded by pid %d); "
            "the library's Go runtime does not survive fork: call multirail only in the process "
            "that initialised it (DataLoader workers may fork as long as they never call it)"
            % (os.getpid(), _load_pid),
        )


def new_error():
    return mr_error()


def check(rc, err, what=""):
    """Raises the Error subclass for rc when rc < 0."""
    if rc >= 0:
        return rc
    msg = err.msg.decode("utf-8", "replace") if err is not None else ""
    code = err.code if err is not None and err.code else rc
    if not msg:
        msg = strerror(rc)
    if what and not msg.startswith("multirail"):
        msg = f"multirail: {what}: {msg}"
    raise error_for(code, msg)


def strerror(code):
    try:
        s = lib().mr_strerror(code)
    except Error:
        return f"error {code}"
    return s.decode("utf-8", "replace") if s else f"error {code}"


def call(name, *args, what=None):
    """Calls mr_<name>(*args, &err) and raises on a negative result."""
    L = lib()
    err = mr_error()
    rc = getattr(L, name)(*args, ctypes.byref(err))
    return check(rc, err, what or name)
