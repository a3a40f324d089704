"""Helpers of the multi-rank test programs (python/tests/t_*.py).

Each program is started N times by a launcher (multirail run, torchrun, or
run_tests.py with env:// variables), calls init(), checks with check(), and
ends with done(), which prints one line "RESULT <json>" per rank for
run_tests.py to read.
"""

import json
import os
import sys
import time
import warnings

try:  # the installed package (scripts/build-python.sh), else the source tree's
    import multirail  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import multirail.torch as mt  # noqa: E402

# torch 1.13 warns of its own private names (_all_gather_base, ...) the tests call on purpose
warnings.filterwarnings("ignore", category=UserWarning, module="torch.distributed")
import faulthandler  # noqa: E402

faulthandler.enable()  # a crash prints every thread's Python stack
T0 = time.monotonic()
RESULT = {"checks": 0}
RANK = -1


def log(*a):
    print(f"[rank {RANK}] {time.monotonic() - T0:7.2f}s", *a, file=sys.stderr, flush=True)


def init(**kw):
    """dist.init_process_group("multirail") under any of the launchers."""
    global RANK
    if os.environ.get("MULTIRAIL_TEST_STACKS"):  # dump every thread's stack when stuck
        import faulthandler

        faulthandler.dump_traceback_later(float(os.environ["MULTIRAIL_TEST_STACKS"]), exit=False)
    torch.set_num_threads(1)
    if os.environ.get("MULTIRAIL_TEST_PLAIN_INIT") == "1":
        dist.init_process_group("multirail", **kw)  # torchrun, env://: no other setting
    else:
        mt.init_process_group(**kw)
    RANK = dist.get_rank()
    RESULT["rank"] = RANK
    RESULT["size"] = dist.get_world_size()
    RESULT["launcher"] = "torchrun" if os.environ.get("TORCHELASTIC_RUN_ID") else (
        "multirail run" if os.environ.get("MULTIRAIL_RDZV") else "env://")
    log("initialised", dist.get_backend(), RESULT["launcher"], f"in {time.monotonic() - T0:.2f}s")
    return RANK, dist.get_world_size()


def check(cond, what):
    RESULT["checks"] += 1
    if not cond:
        raise AssertionError(f"rank {RANK}: {what}")


def equal(got, want, what):
    RESULT["checks"] += 1
    if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
        raise AssertionError(f"rank {RANK}: {what}: got {got!r}, want {want!r}")


def done(**extra):
    """Prints RESULT <json> and, with MULTIRAIL_TEST_RESULTS set (run_tests.py),
    writes it to that directory as <rank>.json (lines of ranks sharing a pipe
    can interleave)."""
    RESULT.update(extra)
    RESULT["seconds"] = round(time.monotonic() - T0, 2)
    text = json.dumps(RESULT)
    d = os.environ.get("MULTIRAIL_TEST_RESULTS")
    if d:
        with open(os.path.join(d, f"{RANK}.json.tmp"), "w") as f:
            f.write(text)
        os.rename(os.path.join(d, f"{RANK}.json.tmp"), os.path.join(d, f"{RANK}.json"))
    print("RESULT " + text, flush=True)


def finish():
    if dist.is_initialized():
        dist.destroy_process_group()
