#!/bin/sh
# `multirail cp` in a two-host lab (rails 200/100/50 Mbit/s): a 1 GiB file,
# the same copy killed halfway and run again (what the second run resends
# beyond what the serving end had verified), and a tree of 10,000 files of
# 16 KiB. Needs root (scripts/lab-deps.sh).
#   usage: sh scripts/lab-cp.sh [MULTIRAIL_BINARY] [BIG_MIB] [SMALL_FILES] [RUNS]
set -eu
BIN=$(realpath "${1:-./multirail}")
BIG_MIB=${2:-1024}
SMALL=${3:-10000}
RUNS=${4:-3}
P=${LAB_PREFIX:-mrc}
A=${P}A
B=${P}B
export MULTIRAIL_TOKEN=${MULTIRAIL_TOKEN:-$("$BIN" token)}
W=$(mktemp -d /var/tmp/lab-cp.XXXXXX)

cleanup() {
	[ -f "$W/serve.pid" ] && kill "$(cat "$W/serve.pid")" 2>/dev/null || true
	sleep 0.3
	"$BIN" lab down --prefix "$P" >/dev/null 2>&1 || true
	rm -rf "$W"
}
trap cleanup EXIT INT TERM

mkdir -p "$W/src/tree" "$W/dst"
head -c "$((BIG_MIB << 20))" /dev/urandom >"$W/src/big"
python3 - "$W/src/tree" "$SMALL" <<'PY'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    sub = os.path.join(d, "d%03d" % (i // 100))
    os.makedirs(sub, exist_ok=True)
    with open(os.path.join(sub, "f%05d" % i), "wb") as f:
        f.write(os.urandom(16384))
PY
"$BIN" lab up --prefix "$P" >/dev/null
ceiling=$(awk 'BEGIN { printf "%.1f", (200 + 100 + 50) * 1448 / 1514 }')
ip netns exec "$B" "$BIN" cp --serve "$W/dst" --listen :7200 2>"$W/serve.log" &
echo $! >"$W/serve.pid"
for i in $(seq 50); do
	ip netns exec "$B" ss -ltn | grep -q ':7200 ' && break
	sleep 0.1
done
RAILS='tcp:10.10.1.1>10.10.1.2,tcp:10.10.2.1>10.10.2.2,tcp:10.10.3.1>10.10.3.2'
cpjson() { # cpjson OUT SRC...: one copy from A, its --json report in OUT
	out=$1
	shift
	ip netns exec "$A" "$BIN" cp -q --json --rails "$RAILS" "$@" >"$out"
}
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
mbit() { python3 -c 'import json,sys; print("%.1f" % (json.load(open(sys.argv[1]))["goodput_bps"]/1e6))' "$1"; }

echo "ceiling (sum of rates x 1448/1514): $ceiling Mbit/s"
for r in $(seq "$RUNS"); do
	rm -rf "${W:?}/dst/"* "$W/dst/".big* 2>/dev/null || true
	sync
	cpjson "$W/big-$r.json" "$W/src/big"
	cmp -s "$W/src/big" "$W/dst/big" || { echo "run $r: the 1 GiB copy differs"; exit 1; }
	rm -rf "${W:?}/dst/"*
	sync
	cpjson "$W/tree-$r.json" "$W/src/tree"
	[ "$(find "$W/dst/tree" -type f | wc -l)" -eq "$SMALL" ] || { echo "run $r: files missing"; exit 1; }
	echo "run $r: ${BIG_MIB} MiB file $(mbit "$W/big-$r.json") Mbit/s; $SMALL x 16 KiB $(mbit "$W/tree-$r.json") Mbit/s ($(field "$W/tree-$r.json" duration_s) s)"
	echo "$(mbit "$W/big-$r.json") $(mbit "$W/tree-$r.json")" >>"$W/all"
done
python3 - "$W/all" "$ceiling" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
ceil = float(sys.argv[2])
for i, name in enumerate(["big file", "16 KiB tree"]):
    xs = [float(r[i]) for r in rows]
    m = statistics.median(xs)
    print(f"median {name}: {m:.1f} Mbit/s ({100*m/ceil:.1f} % of ceiling; range {min(xs):.1f}-{max(xs):.1f}, {len(xs)} runs)")
PY

# Killed halfway: SIGKILL when the serving end's part file passes half the
# size, then run again; the second run sends what the part lacked.
rm -rf "${W:?}/dst/"* "$W/dst/".big* 2>/dev/null || true
size=$((BIG_MIB << 20))
ip netns exec "$A" "$BIN" cp -q --rails "$RAILS" "$W/src/big" >/dev/null 2>&1 &
cpid=$!
while kill -0 $cpid 2>/dev/null; do
	have=$(stat -c %s "$W/dst/.big.multirail-part" 2>/dev/null || echo 0)
	[ "$have" -ge $((size / 2)) ] && break
	sleep 0.05
done
kill -9 $cpid 2>/dev/null || true
wait $cpid 2>/dev/null || true
sleep 0.5
if ! have=$(stat -c %s "$W/dst/.big.multirail-part" 2>/dev/null); then
	echo "the copy finished before it could be killed halfway (file too small to time): no resume measured"
	exit 0
fi
cpjson "$W/resume.json" "$W/src/big"
cmp -s "$W/src/big" "$W/dst/big" || { echo "the resumed copy differs"; exit 1; }
python3 - "$W/resume.json" "$have" "$size" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
have, size = int(sys.argv[2]), int(sys.argv[3])
extra = r["bytes"] - (size - have)
print(f"killed at {have} of {size} bytes on the serving end; the second run kept {r['resumed']} and sent {r['bytes']}: "
      f"{extra} bytes ({100*extra/size:.2f} % of the file) beyond what was verified")
PY
