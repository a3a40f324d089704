"""The torch-free API of the multirail package on 3 ranks: init_env, every
collective and twin on buffers, p2p with any source, a group, the two-step
start (cards exchanged over a first communicator, as an MPI program would
with MPI_Allgather), the loss-tolerant allreduce and its stats.

    multirail run -n 3 -- .venv/bin/python python/tests/t_comm.py
"""

import array
import json
import os
import sys
import time

try:
    import multirail
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import multirail

t0 = time.monotonic()
checks = 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        raise AssertionError(f"rank {c.rank}: {what}")


c = multirail.init_env()
r, n = c.rank, c.size
check(n == 3 and 0 <= r < 3, f"rank {r} of {n}")

b = array.array("d", [r + 1.0, 2.0])
c.allreduce(b)
check(list(b) == [6.0, 6.0], f"allreduce {b}")
b = array.array("i", [r, r])
c.allreduce(b, op="max")
check(list(b) == [2, 2], f"allreduce max {b}")
b = array.array("q", [1 << r])
c.allreduce(b, op="bor")
check(list(b) == [7], f"allreduce bor {b}")
x = array.array("f", [r])
c.bcast(x, root=1)
check(list(x) == [1.0], f"bcast {x}")
out = array.array("f", [0.0] * n)
c.allgather(array.array("f", [r * 10.0]), out)
check(list(out) == [0.0, 10.0, 20.0], f"allgather {out}")
rs = array.array("i", [0])
c.reduce_scatter(array.array("i", [r, r + 1, r + 2]), rs)
check(list(rs) == [3 + 3 * r], f"reduce_scatter {rs}")
a2 = array.array("i", [0] * n)
c.alltoall(array.array("i", [10 * r + j for j in range(n)]), a2)
check(list(a2) == [10 * j + r for j in range(n)], f"alltoall {a2}")
# alltoallv: rank r sends j+1 elements to rank j
send = array.array("i", [v for j in range(n) for v in [100 * r + j] * (j + 1)])
sc = [j + 1 for j in range(n)]
sd = [sum(sc[:j]) for j in range(n)]
rc = [r + 1] * n
rd = [sum(rc[:j]) for j in range(n)]
recv = array.array("i", [0] * sum(rc))
c.alltoallv(send, sc, sd, recv, rc, rd)
check(list(recv) == [v for j in range(n) for v in [100 * j + r] * (r + 1)], f"alltoallv {recv}")
g = array.array("i", [0] * n) if r == 0 else None
c.gather(array.array("i", [r * 7]), g, root=0)
if r == 0:
    check(list(g) == [0, 7, 14], f"gather {g}")
s = array.array("i", [0])
c.scatter(array.array("i", [5, 6, 7]) if r == 2 else None, s, root=2)
check(list(s) == [5 + r], f"scatter {s}")
red = array.array("d", [0.0])
c.reduce(array.array("d", [r + 0.5]), red if r == 1 else None, op="sum", root=1)
if r == 1:
    check(list(red) == [4.5], f"reduce {red}")
# twins, test and poll
reqs = [c.iallreduce(array.array("d", [1.0])) for _ in range(4)] + [c.ibarrier()]
for q in reqs:
    q.wait()
check(all(q.done for q in reqs), "twins done")
# p2p, any source
if r == 0:
    srcs = set()
    for _ in range(n - 1):
        buf = bytearray(8)
        st = c.recv(buf, multirail.ANY_SOURCE, tag=5)
        srcs.add(st.source)
        check(st.bytes == 8 and buf == bytes([st.source]) * 8, f"recv {st} {buf}")
    check(srcs == {1, 2}, f"sources {srcs}")
else:
    c.send(bytes([r]) * 8, 0, tag=5)
# errors: a bad op
try:
    c.allreduce(array.array("d", [1.0]), op="bxor")
    check(False, "bxor on float64 raised nothing")
except multirail.InvalidError as e:
    check(e.code == -1 and "bxor" in str(e).lower(), f"error {e}")
# a group of ranks 0 and 2
if r in (0, 2):
    with c.group([0, 2], key="pair") as pair:
        v = array.array("i", [r])
        pair.allreduce(v)
        check(list(v) == [2] and pair.size == 2 and pair.rank == r // 2, f"group {v}")
# the loss-tolerant allreduce (float32, avg) on stream 3
lf = array.array("f", [float(r)] * 5000)
for _ in range(3):
    c.lossy_allreduce(lf, op="avg", stream=3)
    c.lossy_report(3, 0.1)
stats = c.lossy_stats(3)
check(stats["packets"] > 0, f"lossy stats {stats}")
# the two-step start, cards exchanged over the first communicator
tok = bytearray(128)
if r == 0:
    t = multirail.new_token().encode()
    tok[: len(t)] = t
c.bcast(tok, root=0, dtype="uint8")
p = multirail.prepare(r, n, token=bytes(tok).rstrip(b"\0").decode())
lens = array.array("q", [0] * n)
c.allgather(array.array("q", [len(p.card)]), lens)
m = max(lens)
cards_buf = bytearray(m * n)
c.allgather(p.card + bytes(m - len(p.card)), cards_buf)
cards = [bytes(cards_buf[i * m : i * m + lens[i]]) for i in range(n)]
c2 = p.connect(cards)
v = array.array("d", [r])
c2.allreduce(v)
check(list(v) == [3.0] and (c2.rank, c2.size) == (r, n), f"two-step communicator {v}")
c2.close()
c.barrier()
c.close()
print("RESULT " + json.dumps({"rank": r, "size": n, "checks": checks, "lossy": stats, "seconds": round(time.monotonic() - t0, 2)}), flush=True)
d = os.environ.get("MULTIRAIL_TEST_RESULTS")
if d:
    with open(os.path.join(d, f"{r}.json"), "w") as f:
        json.dump({"rank": r, "size": n, "checks": checks}, f)
