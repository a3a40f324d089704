"""ddp_bench.py - data-parallel training steps of an MLP under PyTorch's
DistributedDataParallel, timed, for multirail's lab bench (test "ddp",
lab/labbench/ddp.go), which embeds it and runs it under torchrun, one
process per host, once with each backend it compares.

  torchrun ... ddp_bench.py [--backend gloo|multirail] [--batch N] [--steps N]
                            [--warmup N] [--layers A,B,...] [--seed N]
  python3 ddp_bench.py --plan [--layers A,B,...]

Every process is one rank of the default process group (env://, as torchrun
sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT), backend gloo (torch's;
GLOO_SOCKET_IFNAME says which NICs) or multirail (`import multirail.torch`
registers it; MULTIRAIL_IFNAME and the other MULTIRAIL_* variables of the
communicator apply).

The model is an MLP of float32 Linear layers with ReLU between them, sizes
--layers (default 1024,2048,1024,1024,10: 5,257,226 parameters, 21.0 MB of
gradients), initialised from --seed on every rank (DDP broadcasts rank 0's
anyway), wrapped in DDP with its defaults (25 MiB buckets, the first one
1 MiB; torch 1.13 rebuilds them after the first step: two buckets here).
Each rank has one fixed batch of --batch samples (default 8, as the lab
bench's; inputs
N(0,1), labels uniform over the last layer's classes, drawn from --seed and
the rank) and trains on it with cross-entropy and SGD (lr 0.01, no
momentum): --warmup steps (default 5), then --steps timed steps (default
30). A step is zero_grad, forward, backward (DDP's allreduce of every
bucket, waited for at its end) and the optimizer's step, timed on every
rank from a barrier before the first timed step to the end of the last.
Then, untimed for the result, the same number of warm-up steps and then of
timed steps under ddp.no_sync() (no allreduce; compute_ms, the same CPUs
shared with the other ranks), and a check that every rank ended with the
same parameters.

Rank 0 prints header lines starting with '#', among them
  # ddp_bench: hosts of ranks 0..N-1: H0 H1 ...; <interfaces>
and one result line, "MRDDP " and a JSON object:
  ranks, backend, torch, params, grad_bytes, layers, batch, steps, warmup,
  buckets (DDP's buckets after its rebuild, as bytes), step_ms (the mean
  over the timed steps of the slowest rank's mean; every step ends with
  the same allreduce), step_ms_min/step_ms_max (rank 0's fastest and
  slowest step), samples_per_s (ranks x batch / step), compute_ms (the
  same under no_sync), busy (the machine's busy CPU share over the timed
  steps from /proc/stat: user+nice+system+irq+softirq of all CPUs over
  wall time x CPUs; null where /proc/stat cannot be read), ranks_busy (the
  share of it the ranks' own processes used: every rank's user+system time,
  all threads, summed, over rank 0's wall time x CPUs), loss_first and
  loss_last (rank 0's loss at the first and the last timed step),
  max_param_diff (the largest difference of any parameter between rank 0
  and any other rank at the end; 0 when replicas agree).
--plan prints, without torch, "PLAN params grad_bytes layers".

Errors are one line on stderr starting "ddp_bench: ". Exit status: 2 for
bad arguments, 4 when torch or the backend cannot be imported, 1 for any
other error.
"""

import datetime
import faulthandler
import json
import os
import re
import signal
import socket
import sys
import time

DEFAULT_LAYERS = [1024, 2048, 1024, 1024, 10]
BACKENDS = ("gloo", "multirail")
MAX_STEPS = 100000
MAX_BATCH = 1 << 16
MAX_WIDTH = 1 << 16
# How long one collective (and the rendezvous) may take, in seconds.
TIMEOUT = 300
# SGD's learning rate: small enough that the loss of a fixed batch falls
# steadily for a few hundred steps.
LR = 0.01


class Usage(Exception):
    """Bad arguments; the message says what and what is allowed."""


class Plan:
    def __init__(self):
        self.backend = "gloo"
        self.batch = 8
        self.steps = 30
        self.warmup = 5
        self.layers = list(DEFAULT_LAYERS)
        self.seed = 0
        self.dry = False


INT_RE = re.compile(r"[0-9]+")


def parse_int(flag, s, lo, hi):
    if not INT_RE.fullmatch(s) or not lo <= int(s) <= hi:
        raise Usage(f'{flag} "{s}" is out of range: allowed {lo}..{hi}')
    return int(s)


def parse_layers(s):
    parts = [p.strip() for p in s.split(",")]
    if len(parts) < 2:
        raise Usage(f'--layers "{s}": want at least two comma-separated widths (input, ..., classes), e.g. 1024,2048,10')
    return [parse_int("--layers", p, 1, MAX_WIDTH) for p in parts]


def parse(args):
    p = Plan()
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--plan":
            p.dry = True
            i += 1
            continue
        name, eq, val = a.partition("=")
        if name not in ("--backend", "--batch", "--steps", "--warmup", "--layers", "--seed"):
            raise Usage(f'unknown argument "{a}"; allowed: --backend gloo|multirail, --batch N, --steps N, --warmup N, --layers A,B,..., --seed N, --plan')
        if not eq:
            if i + 1 >= len(args):
                raise Usage(f"{name} needs a value")
            val = args[i + 1]
            i += 1
        i += 1
        if name == "--backend":
            if val not in BACKENDS:
                raise Usage(f'--backend "{val}": unknown backend; allowed: {", ".join(BACKENDS)}')
            p.backend = val
        elif name == "--batch":
            p.batch = parse_int(name, val, 1, MAX_BATCH)
        elif name == "--steps":
            p.steps = parse_int(name, val, 1, MAX_STEPS)
        elif name == "--warmup":
            p.warmup = parse_int(name, val, 0, MAX_STEPS)
        elif name == "--layers":
            p.layers = parse_layers(val)
        else:
            p.seed = parse_int(name, val, 0, 2**31 - 1)
    return p


def count_params(layers):
    """weights and biases of Linear layers of these widths."""
    return sum(a * b + b for a, b in zip(layers, layers[1:]))


def err(msg):
    print("ddp_bench: " + msg, file=sys.stderr, flush=True)


def read_busy():
    """the machine's busy CPU time in USER_HZ ticks (lab/cpu.go's
    ParseProcStat), None if /proc/stat cannot be read."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        if fields[0] != "cpu":
            return None
        return sum(int(fields[i]) for i in (1, 2, 3, 6, 7))
    except (OSError, ValueError, IndexError):
        return None


def ticks_per_s():
    try:
        return os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError):
        return 100


def interfaces(backend):
    if backend == "gloo":
        return "GLOO_SOCKET_IFNAME=" + os.environ.get("GLOO_SOCKET_IFNAME", "")
    return "MULTIRAIL_IFNAME=" + os.environ.get("MULTIRAIL_IFNAME", "") + \
        " MULTIRAIL_PLAINTEXT=" + os.environ.get("MULTIRAIL_PLAINTEXT", "")


def run(p, torch, dist, DDP):
    rank, n = dist.get_rank(), dist.get_world_size()
    hosts = [None] * n
    dist.all_gather_object(hosts, socket.gethostname())
    if rank == 0:
        print(f"# ddp_bench: DDP of an MLP {','.join(map(str, p.layers))} ({count_params(p.layers)} parameters), "
              f"torch {torch.__version__}, backend {p.backend}, ranks {n}, batch {p.batch} per rank, "
              f"{p.warmup} warm-up and {p.steps} timed steps")
        print(f"# ddp_bench: hosts of ranks 0..{n - 1}: {' '.join(hosts)}; {interfaces(p.backend)}", flush=True)

    torch.manual_seed(p.seed)
    mods = []
    for a, b in zip(p.layers, p.layers[1:]):
        mods += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    model = torch.nn.Sequential(*mods[:-1])
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=LR)
    gen = torch.Generator().manual_seed(p.seed * 1000003 + rank)
    x = torch.randn(p.batch, p.layers[0], generator=gen)
    y = torch.randint(0, p.layers[-1], (p.batch,), generator=gen)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(ddp(x), y)
        loss.backward()
        opt.step()
        return loss

    def timed(count):
        """count steps after a barrier: per-step times in ns, losses."""
        dist.barrier()
        times, losses = [], []
        for _ in range(count):
            t0 = time.perf_counter_ns()
            loss = step()
            times.append(time.perf_counter_ns() - t0)
            losses.append(loss.item())
        return times, losses

    for _ in range(p.warmup):
        step()
    busy0, w0, cpu0 = read_busy(), time.perf_counter(), os.times()
    times, losses = timed(p.steps)
    busy1, w1, cpu1 = read_busy(), time.perf_counter(), os.times()
    cpu = (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system)
    busy = None
    if busy0 is not None and busy1 is not None and w1 > w0:
        busy = (busy1 - busy0) / ticks_per_s() / ((w1 - w0) * (os.cpu_count() or 1))

    # The same steps without the allreduce: what computing alone costs,
    # on CPUs shared as before. Replicas diverge here; they were compared
    # before (below, from a copy).
    params = torch.cat([q.detach().reshape(-1) for q in ddp.parameters()])
    with ddp.no_sync():
        for _ in range(p.warmup):
            step()
        ctimes, _ = timed(p.steps)

    mine = torch.tensor([sum(times) / len(times) / 1e6, sum(ctimes) / len(ctimes) / 1e6, cpu], dtype=torch.float64)
    every = [torch.empty_like(mine) for _ in range(n)]
    dist.all_gather(every, mine)
    ref = params.clone()
    dist.broadcast(ref, 0)
    diff = torch.tensor([float((params - ref).abs().max())], dtype=torch.float64)
    dist.all_reduce(diff, op=dist.ReduceOp.MAX)

    if rank == 0:
        step_ms = max(float(e[0]) for e in every)
        compute_ms = max(float(e[1]) for e in every)
        buckets = []
        try:
            logged = ddp._get_ddp_logging_data()
            sizes = logged.get("rebuilt_bucket_sizes") or logged.get("bucket_sizes") or ""
            buckets = [int(s) for s in str(sizes).replace(",", " ").split()]
        except Exception:  # noqa: BLE001 - a private API: report none rather than fail
            buckets = []
        res = {
            "ranks": n, "backend": p.backend, "torch": torch.__version__,
            "params": count_params(p.layers), "grad_bytes": 4 * count_params(p.layers),
            "layers": p.layers, "batch": p.batch, "steps": p.steps, "warmup": p.warmup,
            "buckets": buckets,
            "step_ms": step_ms, "step_ms_min": min(times) / 1e6, "step_ms_max": max(times) / 1e6,
            "samples_per_s": n * p.batch / (step_ms / 1e3),
            "compute_ms": compute_ms, "busy": busy,
            "ranks_busy": sum(float(e[2]) for e in every) / ((w1 - w0) * (os.cpu_count() or 1)),
            "loss_first": losses[0], "loss_last": losses[-1],
            "max_param_diff": float(diff[0]),
        }
        print("MRDDP " + json.dumps(res, sort_keys=True), flush=True)
    dist.barrier()


def main(argv):
    rank0 = os.environ.get("RANK", "0") == "0"
    try:
        p = parse(argv)
    except Usage as e:
        if rank0:
            err(str(e))
        return 2
    if p.dry:
        n = count_params(p.layers)
        print(f"PLAN {n} {4 * n} {','.join(map(str, p.layers))}")
        return 0
    try:
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
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
    run(p, torch, dist, DDP)
    dist.destroy_process_group()
    return 0


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
