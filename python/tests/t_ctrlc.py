"""Ctrl-C: rank 0 is blocked in an allreduce the others do not join; SIGINT
arrives (a timer thread sends it to the process, as a terminal's Ctrl-C
would); KeyboardInterrupt must be raised within 100 ms. Then the others join
the allreduce, the interrupted call completes in the background, and the
group goes on. Five rounds: through dist.all_reduce (blocking) and through
Work.wait() of async_op=True.

    multirail run -n 3 -- .venv/bin/python python/tests/t_ctrlc.py
"""

import datetime
import os
import signal
import threading
import time

import _common as C
import torch
import torch.distributed as dist

import multirail

rank, size = C.init()
store = dist.distributed_c10d._get_default_store()
latencies = []
ROUNDS = 5
for rnd in range(ROUNDS):
    t = torch.full((1000,), float(rank + 1))
    if rank == 0:
        sent = []

        def interrupt():
            sent.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGINT)

        timer = threading.Timer(0.3, interrupt)
        timer.start()
        try:
            if rnd % 2 == 0:
                dist.all_reduce(t)  # blocks: the others are not there
            else:
                w = dist.all_reduce(t, async_op=True)
                w.wait()
            C.check(False, "the allreduce finished without the others")
        except KeyboardInterrupt:
            lat = time.monotonic() - sent[0]
            latencies.append(lat)
            C.log(f"round {rnd}: KeyboardInterrupt {lat * 1e3:.1f} ms after SIGINT")
        store.set(f"ctrlc/{rnd}", "interrupted")
        time.sleep(0.05)
    else:
        store.wait([f"ctrlc/{rnd}"])
        dist.all_reduce(t)  # now the interrupted call can complete
        C.equal(t, torch.full((1000,), float(sum(range(1, size + 1)))), f"round {rnd}: the allreduce after rank 0's Ctrl-C")
    dist.barrier()  # queued behind the interrupted allreduce on rank 0: completes once it has
# Work.wait(timeout): multirail.TimeoutError when it passes, the call goes on
t = torch.full((10,), float(rank + 1))
if rank == 0:
    w = dist.all_reduce(t, async_op=True)
    t0 = time.monotonic()
    try:
        w.wait(datetime.timedelta(seconds=0.2))
        C.check(False, "wait(timeout) returned without the others")
    except multirail.TimeoutError as e:
        waited = time.monotonic() - t0
        C.check(0.19 < waited < 0.5, f"wait(0.2 s) raised after {waited:.3f}s")
        C.check(isinstance(e, RuntimeError), "TimeoutError is a RuntimeError")
    store.set("ctrlc/timeout", "1")
    C.check(w.wait() and torch.equal(t, torch.full((10,), float(sum(range(1, size + 1))))), "the call went on after the timeout")
else:
    store.wait(["ctrlc/timeout"])
    dist.all_reduce(t)
if rank == 0:
    C.check(len(latencies) == ROUNDS, f"{len(latencies)} of {ROUNDS} interrupts arrived")
    worst = max(latencies)
    C.check(worst < 0.1, f"KeyboardInterrupt took {worst * 1e3:.1f} ms (> 100 ms)")
    C.done(latencies_ms=[round(x * 1e3, 1) for x in latencies], max_ms=round(worst * 1e3, 1))
else:
    C.done()
C.finish()
