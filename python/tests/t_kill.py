"""A killed rank: rank 2 kills itself with SIGKILL in the middle of DDP
training; ranks 0 and 1, waiting in backward() for the bucket's allreduce
(a future completed by the backend's poller thread), must raise (the
library's PeerError, a RuntimeError) within seconds. Run under `multirail run -n 3 --grace 60s` (run stops the
other ranks with SIGTERM when one dies: they ignore it here and report).

    multirail run -n 3 --grace 60s -- .venv/bin/python python/tests/t_kill.py STAMPFILE
"""

import os
import signal
import sys
import time

import _common as C
import torch

stamp = sys.argv[1]
rank, size = C.init()
terms = []
signal.signal(signal.SIGTERM, lambda *a: terms.append(time.time()))  # multirail run's SIGTERM: noted, ignored

torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(64, 512), torch.nn.ReLU(), torch.nn.Linear(512, 64))
model = torch.nn.parallel.DistributedDataParallel(net)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(16, 64)
for i in range(1000):
    if rank == 2 and i == 30:
        with open(stamp + ".tmp", "w") as f:
            f.write(repr(time.time()))
        os.rename(stamp + ".tmp", stamp)
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
    except RuntimeError as e:
        now = time.time()
        for _ in range(100):
            if os.path.exists(stamp):
                break
            time.sleep(0.01)
        killed = float(open(stamp).read())
        secs = now - killed
        C.log(f"raised {secs:.3f}s after rank 2 was killed, at step {i}: {type(e).__name__}: {str(e)[:300]}")
        # Step 29 may fail too: rank 2's allreduce of step 29 returned once
        # its own receives were done and its last sends queued
        # (Conn.SendOwned), and the kill can take those sends with it.
        C.check(i >= 29, f"raised before the kill, at {i}")
        C.check(secs < 30, f"took {secs:.1f}s to raise")
        C.done(raised_after_s=round(secs, 3), error=type(e).__name__, message=str(e)[:300], iteration=i,
               sigterm_after_s=round(terms[0] - killed, 3) if terms else None)
        sys.stdout.flush()
        os._exit(0)
C.check(False, "no error after rank 2 was killed")
