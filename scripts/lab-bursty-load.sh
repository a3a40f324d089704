#!/bin/sh
# Bursty background traffic on every rail of a 4-host `multirail lab up
# --hosts 4` lab, with Debian's iperf3 (scripts/lab-deps.sh installs it):
# host h sends host h+1 bursts of about 0.4 s at each rail's rate
# (10 MB / 5 MB / 2.5 MB at 200/100/50 Mbit/s), 0.2 s apart, on every
# rail, until stopped. Used by the lab training run in BENCHMARKS.md.
#
# usage: scripts/lab-bursty-load.sh PREFIX start|stop   (as root)
set -eu
P=${1:?usage: lab-bursty-load.sh PREFIX start|stop}
stopfile=/tmp/multirail-bursty-load.$P.stop
case ${2:-} in
start) ;;
stop)
	touch "$stopfile"
	sleep 2
	pkill -f "iperf3 -s -D -p 530[123]" || true
	exit 0
	;;
*)
	echo "usage: lab-bursty-load.sh PREFIX start|stop" >&2
	exit 2
	;;
esac
rm -f "$stopfile"
for h in 0 1 2 3; do
	for r in 1 2 3; do ip netns exec "${P}h$h" iperf3 -s -D -p "530$r"; done
done
sleep 1
for h in 0 1 2 3; do
	for r in 1 2 3; do
		case $r in 1) B=10M ;; 2) B=5M ;; 3) B=2500K ;; esac
		dst=10.10.$r.$(((h + 1) % 4 + 1))
		(
			while [ ! -e "$stopfile" ]; do
				ip netns exec "${P}h$h" iperf3 -c "$dst" -p "530$r" -n "$B" -B "10.10.$r.$((h + 1))" >/dev/null 2>&1 || true
				sleep 0.2
			done
		) &
	done
done
