"""Runs the Python tests of multirail (scripts/test-python.sh calls it):
the unit tests, then the multi-rank programs python/tests/t_*.py under
`multirail run`, torchrun and plain env://, checking every rank's RESULT line.

    .venv/bin/python python/tests/run_tests.py --multirail build/multirail [--only NAME,...] [--json FILE]

Exits 1 when any test fails; prints one line per test with its time.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def results_of(out, d):
    res = {}
    for name in os.listdir(d):
        if name.endswith(".json"):
            with open(os.path.join(d, name)) as f:
                r = json.load(f)
            res[r.get("rank")] = r
    if res:
        return res
    for line in out.splitlines():
        i = line.find("RESULT ")
        if i >= 0:
            try:
                r = json.loads(line[i + 7 :])
            except ValueError:
                continue
            res[r.get("rank")] = r
    return res


class Runner:
    def __init__(self, args):
        self.args = args
        self.py = sys.executable
        self.mr = os.path.abspath(args.multirail)
        self.summary = []
        self.failed = 0
        self.tmp = tempfile.mkdtemp(prefix="multirail-pytest-")

    def env(self, **extra):
        e = dict(os.environ)
        e.pop("MULTIRAIL_TOKEN", None)  # torchrun and env:// must work without one
        e.pop("MULTIRAIL_TEST_PLAIN_INIT", None)
        e["PYTHONUNBUFFERED"] = "1"
        e["TMPDIR"] = self.tmp  # the file stores of `multirail run` jobs (multirail.torch.init_process_group) end up here
        e.update(extra)
        return e

    def run(self, name, cmd, ranks, env=None, timeout=180, expect_rc=0, check=None, procs=None):
        """Runs cmd (or procs: a list of (argv, env) started at once), wants a
        RESULT line from every rank in ranks, then check(results) -> str or None."""
        if self.args.only and name not in self.args.only:
            return
        t0 = time.monotonic()
        err = None
        out = ""
        rdir = tempfile.mkdtemp(prefix="results-", dir=self.tmp)
        env = dict(env or self.env(), MULTIRAIL_TEST_RESULTS=rdir)
        procs = [(a, dict(e, MULTIRAIL_TEST_RESULTS=rdir)) for a, e in procs] if procs is not None else None
        try:
            if procs is None:
                p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   timeout=timeout, text=True, cwd=ROOT)
                out, rcs = p.stdout, [p.returncode]
            else:
                ps = [subprocess.Popen(a, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
                      for a, e in procs]
                outs = []
                deadline = time.monotonic() + timeout
                for q in ps:
                    try:
                        outs.append(q.communicate(timeout=max(1, deadline - time.monotonic()))[0])
                    except subprocess.TimeoutExpired:
                        for x in ps:
                            x.kill()
                        raise
                out, rcs = "\n".join(outs), [q.returncode for q in ps]
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or "") if isinstance(e.stdout, str) else (e.stdout or b"").decode("utf-8", "replace")
            err = f"timed out after {timeout}s"
            rcs = [None]
        secs = time.monotonic() - t0
        res = results_of(out, rdir)
        if err is None and expect_rc is not None and any(rc != expect_rc for rc in rcs):
            err = f"exit status {rcs}, want {expect_rc}"
        if err is None:
            missing = [r for r in ranks if r not in res]
            if missing:
                err = f"no RESULT from ranks {missing}"
        if err is None and check is not None:
            try:
                err = check(res)
            except Exception as e:  # noqa: BLE001
                err = f"check failed: {e!r}"
        ok = err is None
        self.summary.append({"test": name, "ok": ok, "seconds": round(secs, 1), "error": err,
                             "results": {str(k): v for k, v in res.items()}})
        print(f"{'PASS' if ok else 'FAIL'} {name:34} {secs:6.1f}s" + ("" if ok else f"  {err}"), flush=True)
        if not ok:
            self.failed += 1
            print("---- output of " + name + " (last 120 lines) ----", file=sys.stderr)
            print("\n".join(out.splitlines()[-120:]), file=sys.stderr)
            print("---- end of " + name + " ----", file=sys.stderr, flush=True)
        return res

    def mrun(self, n, prog, *args, flags=(), **kw):
        return [self.mr, "run", "-n", str(n), *flags, "--", self.py, os.path.join(HERE, prog), *args]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--multirail", default=os.path.join(ROOT, "build", "multirail"))
    ap.add_argument("--only", type=lambda s: set(s.split(",")), default=None)
    ap.add_argument("--json", default=None, help="write the summary here")
    args = ap.parse_args()
    R = Runner(args)
    T = os.path.join(HERE, "{}")
    t_all = time.monotonic()

    R.run("unit", [R.py, "-m", "unittest", "-v", os.path.join(HERE, "test_unit.py")], ranks=[], timeout=120)

    R.run("package API without torch (multirail run -n 3)", R.mrun(3, "t_comm.py"), ranks=[0, 1, 2])

    def methods(res):
        for r, v in res.items():
            if v.get("checks", 0) < 900:
                return f"rank {r} made only {v.get('checks')} checks"
        return None

    R.run("collectives (multirail run -n 3)", R.mrun(3, "t_collectives.py"), ranks=[0, 1, 2], check=methods)
    R.run("collectives (torchrun, 3)",
          [R.py, os.path.join(ROOT, "scripts", "torchrun-wrapper.py"), "--standalone", "--nproc_per_node", "3",
           T.format("t_collectives.py")],
          ranks=[0, 1, 2], env=R.env(MULTIRAIL_TEST_PLAIN_INIT="1"), check=methods)
    port = free_port()
    procs = []
    for r in range(3):
        e = R.env(MULTIRAIL_TEST_PLAIN_INIT="1", RANK=str(r), WORLD_SIZE="3", LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1",
                  MASTER_PORT=str(port))
        for k in [k for k in e if k.startswith("MULTIRAIL_") and k not in ("MULTIRAIL_TEST_PLAIN_INIT", "MULTIRAIL_LIB")]:
            if k != "MULTIRAIL_TEST_PLAIN_INIT":
                e.pop(k)
        procs.append(([R.py, T.format("t_collectives.py")], e))
    R.run("collectives (env://, 3)", None, ranks=[0, 1, 2], procs=procs, check=methods)

    def ddp_check(n):
        def check(res):
            d = res[0]["ddp"]
            for what, v in d.items():
                if "max_abs_diff_vs_gloo" not in v:
                    continue
                tol = 0.0 if n == 2 else (2e-3 if "fp16" in what else 1e-6)
                if v["max_abs_diff_vs_gloo"] > tol:
                    return f"{what}: {v['max_abs_diff_vs_gloo']} > {tol}"
                if n == 2 and not v["bit_identical"]:
                    return f"{what}: not bit-identical on 2 ranks"
            if "fork_child" not in d or "dataloader_num_workers_2" not in d:
                return "the fork and DataLoader checks did not run"
            return None

        return check

    R.run("DDP vs gloo (multirail run -n 3)", R.mrun(3, "t_ddp.py"), ranks=[0, 1, 2], check=ddp_check(3))
    R.run("DDP vs gloo (multirail run -n 2)", R.mrun(2, "t_ddp.py"), ranks=[0, 1], check=ddp_check(2))
    R.run("loss-tolerant hook calm", R.mrun(3, "t_lossy.py", "calm"), ranks=[0, 1, 2],
          check=lambda res: None if all(v["max_abs_diff_vs_exact"] <= 1e-5 for v in res.values()) else "not exact")
    R.run("loss-tolerant hook storm", R.mrun(3, "t_lossy.py", "storm", "40",
                                              flags=("--emu", "emu:50mbit/1ms,emu:20mbit/1ms", "--emu-load", "bursty")),
          ranks=[0, 1, 2], check=lambda res: None if res[0]["discarded_all_ranks"] > 0 and res[0]["loss_after"] < res[0]["loss_before"] else "no discards or no progress")
    stamp = os.path.join(R.tmp, "killed")
    R.run("killed rank (SIGKILL on rank 2)", R.mrun(3, "t_kill.py", stamp, flags=("--grace", "60s")), ranks=[0, 1],
          expect_rc=None, check=lambda res: None if all(res[r]["raised_after_s"] < 30 for r in (0, 1)) else "too slow")
    R.run("Ctrl-C (SIGINT in a blocked allreduce)", R.mrun(3, "t_ctrlc.py"), ranks=[0, 1, 2],
          check=lambda res: None if res[0]["max_ms"] < 100 else f"{res[0]['max_ms']} ms")

    total = time.monotonic() - t_all
    print(f"{'FAILED' if R.failed else 'ok'}: {len(R.summary) - R.failed} of {len(R.summary)} tests passed in {total:.1f}s")
    for s in R.summary:
        res = s["results"]
        if s["test"].startswith("killed") and res:
            print("  killed rank: survivors raised after " + ", ".join(f"rank {r}: {v['raised_after_s'] * 1e3:.0f} ms" for r, v in sorted(res.items())))
        if s["test"].startswith("Ctrl-C") and "0" in res:
            print(f"  Ctrl-C: KeyboardInterrupt after {res['0']['latencies_ms']} ms")
        if s["test"].startswith("loss-tolerant hook storm") and "0" in res:
            r0 = res["0"]
            print(f"  storm: loss {r0['loss_before']:.3f} -> {r0['loss_after']:.3f}, discarded {r0['discarded_all_ranks']} of {r0['packets_all_ranks']} packets (all ranks)")
        if s["test"].startswith("loss-tolerant hook calm") and "0" in res:
            c = res["0"]["controller"]
            print(f"  calm: exact within {res['0']['max_abs_diff_vs_exact']:.2g} with lossy_reliable; default controller discarded {100 * c['discarded_fraction']:.1f} % (rank 0), max |diff| {c['max_abs_diff_vs_exact']:.3g}")
    shutil.rmtree(R.tmp, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seconds": round(total, 1), "failed": R.failed, "tests": R.summary}, f, indent=1)
    sys.exit(1 if R.failed else 0)


if __name__ == "__main__":
    main()
