#!/bin/sh
# iperf3 through `multirail tunnel` against iperf3 under `mptcpize run` (Linux
# MPTCP), side by side in one two-host lab (rails 200/100/50 Mbit/s), runs
# interleaved; then iperf3 through the tunnel while a rail's link goes down
# mid-run. Needs root, Debian's iperf3 and mptcpd (scripts/lab-deps.sh).
#   usage: sh scripts/lab-tunnel.sh [MULTIRAIL_BINARY] [SECONDS] [RUNS]
# TUNNEL_FLAGS adds flags to both tunnel ends (e.g. "--window 16MiB");
# LAB_RATES sets the rails' rates (default 200mbit,100mbit,50mbit).
# Prints one line per run and a summary; exits non-zero if any iperf3 failed.
set -eu
BIN=${1:-./multirail}
T=${2:-20}
RUNS=${3:-3}
P=${LAB_PREFIX:-mrt}
A=${P}A
B=${P}B
BIN=$(realpath "$BIN")
export MULTIRAIL_TOKEN=${MULTIRAIL_TOKEN:-$("$BIN" token)}
OUT=$(mktemp -d)

cleanup() {
	kill $(cat "$OUT"/*.pid 2>/dev/null) 2>/dev/null || true
	sleep 0.5
	"$BIN" lab down --prefix "$P" >/dev/null 2>&1 || true
	rm -rf "$OUT"
}
trap cleanup EXIT INT TERM

RATES=${LAB_RATES:-200mbit,100mbit,50mbit}
"$BIN" lab up --prefix "$P" --rates "$RATES" >/dev/null
ceiling=$(echo "$RATES" | tr ',' '\n' | sed 's/mbit$//' | awk '{ s += $1 } END { printf "%.1f", s * 1448 / 1514 }')
n=$(echo "$RATES" | tr ',' '\n' | wc -l)
RAILS=$(seq "$n" | awk '{ printf "%stcp:10.10.%d.1>10.10.%d.2", (NR > 1 ? "," : ""), $1, $1 }')
# Servers in B: iperf3 behind the tunnel's target, iperf3 under MPTCP on rail0.
ip netns exec "$B" iperf3 -s -p 5201 -B 127.0.0.1 >/dev/null 2>&1 &
echo $! >"$OUT/ip1.pid"
ip netns exec "$B" mptcpize run iperf3 -s -p 5202 >/dev/null 2>&1 &
echo $! >"$OUT/ip2.pid"
ip netns exec "$B" "$BIN" tunnel serve --listen :7100 --to 127.0.0.1:5201 ${TUNNEL_FLAGS:-} 2>"$OUT/serve.log" &
echo $! >"$OUT/serve.pid"
# The client end in A waits for the serving end: connect dials at start.
for i in $(seq 50); do
	ip netns exec "$B" ss -ltn | grep -q ':7100 ' && ip netns exec "$B" ss -ltn | grep -q ':5201 ' && break
	sleep 0.1
done
ip netns exec "$A" "$BIN" tunnel connect --port 7100 --local 127.0.0.1:5201 ${TUNNEL_FLAGS:-} \
	--rails "$RAILS" 2>"$OUT/connect.log" &
echo $! >"$OUT/connect.pid"
for i in $(seq 100); do
	ip netns exec "$A" ss -ltn | grep -q '127.0.0.1:5201 ' && break
	sleep 0.1
done

# mbit FILE: the receiver's goodput of an iperf3 --json result, in Mbit/s.
mbit() {
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.1f" % (d["end"]["sum_received"]["bits_per_second"]/1e6))' "$1"
}
fail=0
run() { # run NAME ARGS...: one iperf3 client in A, prints its goodput
	name=$1
	shift
	if ip netns exec "$A" "$@" -t "$T" --json >"$OUT/$name.json" 2>"$OUT/$name.err"; then
		mbit "$OUT/$name.json"
	else
		fail=1
		echo "FAILED($(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("error","?"))' "$OUT/$name.json" 2>/dev/null || cat "$OUT/$name.err"))"
	fi
}
echo "rails $RATES; ceiling (sum of rates x 1448/1514): $ceiling Mbit/s; $T s per run"
printf '%-4s %12s %12s %12s %12s\n' run tunnel-P1 mptcp-P1 tunnel-P8 mptcp-P8
for r in $(seq "$RUNS"); do
	t1=$(run "t1-$r" iperf3 -c 127.0.0.1 -p 5201)
	m1=$(run "m1-$r" mptcpize run iperf3 -c 10.10.1.2 -p 5202)
	t8=$(run "t8-$r" iperf3 -c 127.0.0.1 -p 5201 -P 8)
	m8=$(run "m8-$r" mptcpize run iperf3 -c 10.10.1.2 -p 5202 -P 8)
	printf '%-4s %12s %12s %12s %12s\n' "$r" "$t1" "$m1" "$t8" "$m8"
	echo "$t1 $m1 $t8 $m8" >>"$OUT/all"
done
python3 - "$OUT/all" "$ceiling" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
ceil = float(sys.argv[2])
for i, name in enumerate(["tunnel -P 1", "mptcp -P 1", "tunnel -P 8", "mptcp -P 8"]):
    xs = [float(r[i]) for r in rows if not r[i].startswith("FAILED")]
    if xs:
        m = statistics.median(xs)
        print(f"median {name}: {m:.1f} Mbit/s ({100*m/ceil:.1f} % of ceiling; range {min(xs):.1f}-{max(xs):.1f}, {len(xs)} runs)")
PY
# A rail's link goes down a third into the run and comes back at two thirds.
(sleep $((T / 3)) && ip netns exec "$A" ip link set rail1 down && sleep $((T / 3)) && ip netns exec "$A" ip link set rail1 up) &
flap=$!
down=$(run down iperf3 -c 127.0.0.1 -p 5201)
wait $flap
echo "tunnel -P 1 with rail1 down from $((T / 3)) s to $((2 * T / 3)) s: $down Mbit/s"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print("  per second:", " ".join("%.0f" % (i["sum"]["bits_per_second"] / 1e6) for i in d["intervals"]))' "$OUT/down.json" 2>/dev/null || true
exit $fail
