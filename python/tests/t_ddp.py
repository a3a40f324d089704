"""DDP over the multirail backend against gloo on the same seeds, for every
DDP option; torch's allreduce_hook and fp16_compress_hook; DataLoader
workers (forked) during DDP; a forked child calling the backend.

With 3 ranks the parameters must be within 1e-6 of gloo's (summation order),
with 2 ranks bit-identical; in both cases identical on every rank.

    multirail run -n 3 -- .venv/bin/python python/tests/t_ddp.py
    multirail run -n 2 -- .venv/bin/python python/tests/t_ddp.py
"""

import os
import time

import _common as C
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

import multirail

rank, size = C.init()
world = dist.distributed_c10d._get_default_group()
gloo = dist.new_group(backend="gloo")
TOL = 1e-6 if size > 2 else 0.0
results = {}


class Net(nn.Module):
    def __init__(self, unused=False):
        super().__init__()
        self.a = nn.Linear(16, 64)
        self.b = nn.Linear(64, 64)
        self.c = nn.Linear(64, 4)
        if unused:
            self.extra = nn.Linear(64, 4)  # used on even steps only
        self.unused = unused
        self.step = 0

    def forward(self, x):
        h = torch.relu(self.a(x))
        h = torch.relu(self.b(h))
        out = self.c(h)
        if self.unused and self.step % 2 == 0:
            out = out + self.extra(h)
        return out


TEACHER = torch.randn(16, 4, generator=torch.Generator().manual_seed(7))


def batches(n, seed):
    """A learnable task: y = x @ TEACHER, x drawn per rank."""
    g = torch.Generator().manual_seed(seed)
    xs = [torch.randn(8, 16, generator=g) for _ in range(n)]
    return [(x, x @ TEACHER) for x in xs]


def train(pg, steps=6, option="default", hook=None):
    torch.manual_seed(1234)  # the same initial model on every rank and backend
    net = Net(unused=option == "find_unused_parameters")
    kw = {"process_group": pg, "bucket_cap_mb": 0.01}  # several buckets
    if option == "default":
        kw.pop("bucket_cap_mb")
    if option == "find_unused_parameters":
        kw["find_unused_parameters"] = True
    if option == "static_graph":
        kw["static_graph"] = True
    if option == "gradient_as_bucket_view":
        kw["gradient_as_bucket_view"] = True
    model = DDP(net, **kw)
    if hook is not None:
        model.register_comm_hook(pg, hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    n = steps + (rank if option == "join" else 0)  # uneven inputs
    data = batches(n, seed=100 + rank)
    losses = []
    before = evaluate(net)

    def one(x, y, sync=True):
        net.step += 1
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    if option == "join":
        with model.join():
            for x, y in data:
                opt.zero_grad()
                losses.append(float(one(x, y)))
                opt.step()
    elif option == "no_sync":
        for i in range(0, len(data) - 1, 2):
            opt.zero_grad()
            with model.no_sync():  # accumulate locally
                one(*data[i])
            losses.append(float(one(*data[i + 1])))  # synchronised
            opt.step()
    else:
        for x, y in data:
            opt.zero_grad()
            losses.append(float(one(x, y)))
            opt.step()
    return torch.cat([p.detach().reshape(-1) for p in net.parameters()]), [before, evaluate(net)]


EVAL = batches(1, seed=99)[0]


@torch.no_grad()
def evaluate(net):
    """The loss on a fixed batch (the same on every rank)."""
    net.step = 1  # the extra branch, if any, off
    return float(nn.functional.mse_loss(net(EVAL[0]), EVAL[1]))


def same_on_every_rank(flat, what):
    outs = [torch.empty_like(flat) for _ in range(size)]
    dist.all_gather(outs, flat, group=gloo)  # checked through gloo: independent of the backend under test
    for r in range(size):
        C.check(torch.equal(outs[r], flat), f"{what}: parameters differ between rank {rank} and rank {r}")


def compare(option, hook_name=None, tol=None):
    tol = TOL if tol is None else tol
    hook = {"allreduce_hook": default_hooks.allreduce_hook, "fp16_compress_hook": default_hooks.fp16_compress_hook}.get(hook_name)
    t0 = time.monotonic()
    mr, mr_losses = train(world, option=option, hook=hook)
    t_mr = time.monotonic() - t0
    gl, gl_losses = train(gloo, option=option, hook=hook)
    diff = float((mr - gl).abs().max())
    what = option + (f" + {hook_name}" if hook_name else "")
    same_on_every_rank(mr, what + " (multirail)")
    C.check(diff <= tol, f"{what}: multirail and gloo parameters differ by {diff} > {tol}")
    C.check(mr_losses[1] < mr_losses[0], f"{what}: the loss did not fall: {mr_losses}")
    results[what] = {"max_abs_diff_vs_gloo": diff, "bit_identical": diff == 0.0, "seconds": round(t_mr, 2)}
    C.log(f"DDP {what}: max |multirail - gloo| = {diff:.3g}, {t_mr:.2f}s")


ONLY = os.environ.get("MULTIRAIL_TEST_ONLY", "")
for option in ["default", "find_unused_parameters", "no_sync", "join", "static_graph", "gradient_as_bucket_view"]:
    if not ONLY or option in ONLY.split(","):
        compare(option)
compare("default", "allreduce_hook")
# fp16: gloo adds float16 values one rank at a time, multirail reduces through
# float32 and rounds once: equal up to float16 rounding.
compare("default", "fp16_compress_hook", tol=0.0 if size == 2 else 2e-3)


# ---- DataLoader workers (forked) during DDP
class DS(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        x = torch.randn(16, generator=torch.Generator().manual_seed(1000 * rank + i))
        return x, x @ TEACHER


torch.manual_seed(1234)
net = Net()
model = DDP(net, process_group=world)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
t0 = time.monotonic()
loader = torch.utils.data.DataLoader(DS(), batch_size=8, num_workers=2)
C.check(loader.multiprocessing_context is None or loader.multiprocessing_context.get_start_method() == "fork", "fork start method")
steps = 0
for epoch in range(2):
    for x, y in loader:
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        steps += 1
flat = torch.cat([p.detach().reshape(-1) for p in net.parameters()])
same_on_every_rank(flat, "DataLoader")
results["dataloader_num_workers_2"] = {"steps": steps, "seconds": round(time.monotonic() - t0, 2)}
C.log(f"DDP with DataLoader(num_workers=2, fork): {steps} steps ok")

# ---- a forked child calling the backend raises at once
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    t = time.monotonic()
    try:
        dist.all_reduce(torch.ones(3))
        msg = "no error"
    except multirail.ForkError as e:
        msg = f"ForkError {time.monotonic() - t:.6f} {e}"
    except BaseException as e:  # noqa: BLE001
        msg = f"wrong {e!r}"
    os.write(w, msg.encode())
    os._exit(0)
os.close(w)
msg = os.read(r, 8192).decode()
os.close(r)
os.waitpid(pid, 0)
C.check(msg.startswith("ForkError "), f"forked child: {msg}")
secs = float(msg.split()[1])
C.check(secs < 1.0, f"forked child took {secs}s to raise")
results["fork_child"] = {"raised_in_s": secs, "message": msg.split(" ", 2)[2][:200]}
C.log(f"forked child raised in {secs * 1e3:.3f} ms: {msg[:160]}")
# the parent still works after the fork
t = torch.ones(2)
dist.all_reduce(t)
C.equal(t, torch.full((2,), float(size)), "all_reduce after a fork")

C.done(ddp=results)
C.finish()
