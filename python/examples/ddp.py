"""A small DDP training run over the torch.distributed backend "multirail".

    sh scripts/build-python.sh                      # once: library, .venv, package
    go build -o build/multirail ./cmd/multirail     # the launcher
    build/multirail run -n 3 -- .venv/bin/python python/examples/ddp.py
    build/multirail run -n 3 -- .venv/bin/python python/examples/ddp.py --lossy
    # or: .venv/bin/python scripts/torchrun-wrapper.py --standalone --nproc_per_node 3 python/examples/ddp.py

Each rank trains the same MLP on its own shard of a synthetic regression task
(y = x @ W); DDP averages the gradients over the multirail backend (with
--lossy through the loss-tolerant allreduce hook). Rank 0 prints the loss.
"""

import argparse
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import multirail.torch  # registers the backend "multirail"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--lossy", action="store_true", help="the loss-tolerant allreduce hook")
    args = ap.parse_args()

    # torchrun / env:// -> dist.init_process_group("multirail");
    # multirail run -> the same, meeting in a file store on this host.
    multirail.torch.init_process_group()
    rank, size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same initial model on every rank (DDP broadcasts rank 0's anyway)
    model = DDP(nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.Linear(256, 8)))
    state = None
    if args.lossy:
        state = multirail.torch.LossTolerantState(error_feedback=True, exact_steps=5, average_every=20)
        model.register_comm_hook(state, multirail.torch.lossy_allreduce_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    w = torch.randn(32, 8, generator=torch.Generator().manual_seed(1))
    g = torch.Generator().manual_seed(100 + rank)  # this rank's data
    t0 = time.monotonic()
    for step in range(args.steps):
        x = torch.randn(64, 32, generator=g)
        loss = nn.functional.mse_loss(model(x), x @ w)
        opt.zero_grad()
        if state is not None:
            state.report_loss(loss)
        loss.backward()
        opt.step()
        if state is not None:
            state.step(model.module)  # periodic exact averaging of the parameters
        if rank == 0 and (step % 20 == 0 or step == args.steps - 1):
            print(f"step {step:4d}  loss {loss.item():.4f}", flush=True)
    if state is not None:
        state.average_parameters(model.module)
    secs = time.monotonic() - t0
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    outs = [torch.empty_like(flat) for _ in range(size)]
    dist.all_gather(outs, flat)
    same = all(torch.equal(o, flat) for o in outs)
    if rank == 0:
        print(f"{size} ranks, backend {dist.get_backend()}, {args.steps} steps in {secs:.2f}s; replicas identical: {same}")
        if state is not None:
            print("loss-tolerant allreduce:", state.stats())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
