"""The loss-tolerant DDP hook (multirail.torch.lossy_allreduce_hook).

    calm:   multirail run -n 3 -- .venv/bin/python python/tests/t_lossy.py calm
            the default group is gloo's; two multirail groups meet through
            the store: one with "lossy_reliable" (the controller never
            discards: the hook must equal exact allreduce within 1e-5), one
            with the default controller (its discards on an uncongested
            host are measured and reported; the loss must fall)
    storm:  multirail run -n 3 --emu emu:50mbit/1ms,emu:20mbit/1ms --emu-load bursty:... \
                -- .venv/bin/python python/tests/t_lossy.py storm
            under emulated storms it discards (stats: discarded > 0), the loss
            still falls, and the periodic averaging leaves the replicas identical
"""

import sys
import time

import _common as C
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

mode = sys.argv[1] if len(sys.argv) > 1 else "calm"
dist._DEFAULT_FIRST_BUCKET_BYTES = 100_000  # DDP's first bucket as small as the rest: several buckets (streams)
if mode == "calm":
    rank, size = C.init(backend="gloo")
    world = dist.new_group(backend="multirail", pg_options=C.mt.Options({"lossy_reliable": True}))
    ctl = dist.new_group(backend="multirail")
    C.check(isinstance(world, C.mt.ProcessGroupMultirail) and isinstance(ctl, C.mt.ProcessGroupMultirail), "store-bootstrapped groups")
else:
    rank, size = C.init()
    world = dist.distributed_c10d._get_default_group()
TEACHER = torch.randn(32, 8, generator=torch.Generator().manual_seed(7))
EVAL_X = torch.randn(256, 32, generator=torch.Generator().manual_seed(99))
EVAL_Y = EVAL_X @ TEACHER


def net():
    torch.manual_seed(1234)
    return nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 8))


@torch.no_grad()
def evaluate(m):
    return float(nn.functional.mse_loss(m(EVAL_X), EVAL_Y))


def train(steps, hook_state=None, lr=0.05, group=None):
    m = net()
    model = DDP(m, process_group=group or world, bucket_cap_mb=0.1)  # ~77k parameters (300 KB): 3-4 buckets
    if hook_state is not None:
        model.register_comm_hook(hook_state, C.mt.lossy_allreduce_hook)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(100 + rank)
    before = evaluate(m)
    t0 = time.monotonic()
    for step in range(steps):
        x = torch.randn(32, 32, generator=g)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), x @ TEACHER)
        if hook_state is not None:
            hook_state.report_loss(loss)
        loss.backward()
        opt.step()
        if hook_state is not None:
            hook_state.step(m)
    secs = time.monotonic() - t0
    return m, before, evaluate(m), secs


def flat(m):
    return torch.cat([p.detach().reshape(-1) for p in m.parameters()])


def replicas_identical(m, what):
    f = flat(m)
    outs = [torch.empty_like(f) for _ in range(size)]
    dist.all_gather(outs, f, group=world)
    spread = max(float((o - f).abs().max()) for o in outs)
    return spread


if mode == "calm":
    steps = 20
    exact, b0, a0, t_exact = train(steps)
    st = C.mt.LossTolerantState(process_group=world, exact_steps=3, average_every=0)
    lossy, b1, a1, t_lossy = train(steps, st)
    stats = st.stats()
    diff = float((flat(exact) - flat(lossy)).abs().max())
    C.log(f"calm, no discards (lossy_reliable): exact {a0:.5f}, loss-tolerant {a1:.5f}; max |diff| = {diff:.3g}; stats {stats}")
    C.check(stats["lossy_calls"] > 0, f"the hook never ran the loss-tolerant allreduce: {stats}")
    C.check(len(st._streams) >= 2, f"want several buckets (streams), got {sorted(st._streams)}")
    C.check(stats["packets"] > 0 and stats["discarded"] == 0, f"packets: {stats}")
    C.check(diff <= 1e-5, f"calm: loss-tolerant and exact differ by {diff}")
    C.check(a1 < b1, f"calm: the loss did not fall: {b1} -> {a1}")
    # the default controller on the same uncongested host: measured, reported
    st2 = C.mt.LossTolerantState(process_group=ctl, exact_steps=3, average_every=10)
    ctl_m, b2, a2, t_ctl = train(steps, st2, group=ctl)
    st2.average_parameters(ctl_m)
    stats2 = st2.stats()
    diff2 = float((flat(exact) - flat(ctl_m)).abs().max())
    frac2 = stats2["discarded"] / max(1, stats2["packets"])
    C.log(f"calm, default controller: loss {b2:.4f} -> {a2:.4f}; discarded {100 * frac2:.1f} % of {stats2['packets']} packets; "
          f"max |diff vs exact| = {diff2:.3g}")
    C.check(a2 < b2, f"calm, default controller: the loss did not fall: {b2} -> {a2}")
    C.done(mode=mode, max_abs_diff_vs_exact=diff, stats=stats, seconds_exact=round(t_exact, 2), seconds_lossy=round(t_lossy, 2),
           controller={"discarded_fraction": round(frac2, 4), "max_abs_diff_vs_exact": diff2, "loss_before": b2, "loss_after": a2,
                       "stats": stats2})
else:
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    st = C.mt.LossTolerantState(exact_steps=3, error_feedback=True, average_every=10)
    m, before, after, secs = train(steps, st)
    st.average_parameters(m)  # a last exact average: the replicas agree
    stats = st.stats(per_stream=True)
    spread = replicas_identical(m, "storm")
    frac = stats["discarded"] / max(1, stats["packets"])
    C.log(f"storm: loss {before:.4f} -> {after:.4f} in {steps} steps ({secs:.1f}s); discarded {stats['discarded']} of "
          f"{stats['packets']} packets ({100 * frac:.1f} %), missing {stats['missing']}; {stats['averages']} averages; spread {spread}")
    # every rank must see the same verdict: the discard counts differ per rank
    tot = torch.tensor([stats["discarded"], stats["packets"]], dtype=torch.int64)
    dist.all_reduce(tot)
    C.check(int(tot[0]) > 0, f"storm: nothing was discarded on any rank: {stats}")
    C.check(after < 0.8 * before, f"storm: the loss did not fall enough: {before} -> {after}")
    C.check(spread == 0.0, f"storm: replicas differ by {spread} after the final average")
    C.done(mode=mode, loss_before=before, loss_after=after, discarded_all_ranks=int(tot[0]), packets_all_ranks=int(tot[1]),
           stats={k: v for k, v in stats.items() if k != "streams"}, streams=len(stats["streams"]), seconds=round(secs, 2))
C.finish()
