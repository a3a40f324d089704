#!/usr/bin/python3
"""torchrun from Debian's python3-torch, made to work on Python 3.11.

usage: python3 scripts/torchrun-wrapper.py TORCHRUN-ARGS...
  e.g. python3 scripts/torchrun-wrapper.py --standalone --nproc_per_node 2 --no_python \
           sh -c 'env > /tmp/tr-$RANK'

Debian 12's python3-torch (torch 1.13 for the system Python 3.11) ships a
/usr/bin/torchrun that fails before starting any worker with
"AttributeError: 'NoneType' object has no attribute 'get'":
Std.from_str("0") in torch/distributed/elastic/multiprocessing/api.py looks
the value up by iterating over the IntFlag Std, and on Python 3.11 that
iteration yields only the single-bit members (OUT, ERR), never NONE (0) or
ALL (3), so it returns None for the default "--redirects 0 --tee 0". This
wrapper replaces Std.from_str with one that maps the digits 0-3 (plain, or
per local rank as "0:3,1:0") to Std(value) directly, then runs
torch.distributed.run.main(), which is what /usr/bin/torchrun runs.

Debian's torch lives in /usr/lib/python3/dist-packages: when the python3
that runs this script cannot import torch (a pyenv or venv python3 on PATH),
the script re-executes itself with /usr/bin/python3.

Install: apt-get install -y python3-torch (or, as root,
sh scripts/comm-deps.sh --torch).
"""

import os
import re
import sys

SYSTEM_PYTHON = "/usr/bin/python3"

try:
    import torch.distributed.run as torch_run
    from torch.distributed.elastic.multiprocessing import api as mp_api
except ImportError as err:
    if os.path.realpath(sys.executable) != os.path.realpath(SYSTEM_PYTHON) and os.path.exists(SYSTEM_PYTHON):
        os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON, os.path.abspath(__file__)] + sys.argv[1:])
    sys.exit(
        f"torchrun-wrapper: cannot import torch with {sys.executable} ({err}); "
        "install python3-torch (apt-get install -y python3-torch)"
    )


def _from_str(vm):
    """Std.from_str of torch 1.13, without the iteration over the IntFlag."""
    Std = mp_api.Std
    if re.match(mp_api._VALUE_REGEX, vm):  # a digit: "0"
        return Std(int(vm))
    if re.match(mp_api._MAPPING_REGEX, vm):  # per local rank: "0:1,1:2"
        return {int(i): Std(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
    raise ValueError(f"{vm} does not match: <{mp_api._VALUE_REGEX}> or <{mp_api._MAPPING_REGEX}>")


# Patch only where the shipped version is broken (a later torch may be fine).
if mp_api.Std.from_str("0") is None:
    mp_api.Std.from_str = staticmethod(_from_str)

if __name__ == "__main__":
    sys.argv[0] = "torchrun"
    sys.exit(torch_run.main())
