#!/bin/sh
# Install what `multirail lab` needs on Debian/Ubuntu, when it is missing:
#   iproute2 (ip, tc)   namespaces, veths, tbf, MPTCP endpoints  (required)
#   ethtool             offloads off on the rails                 (required unless --offloads)
#   iperf3              the competing stream of lab bench and lab load (else the Go stream)
#   mptcpd (mptcpize)   MPTCP for unmodified programs: scripts/lab-tunnel.sh's comparison
#   openmpi-bin, libopenmpi-dev (mpirun, mpicc)                   (lab bench's openmpi-* systems)
#   python3-torch (torchrun, gloo), only with --torch             (lab bench's gloo system; about
#                                                                  230 MB, 1-3 min; not by default)
# Idempotent: quiet and quick when everything is there. Run as root.
# usage: sh scripts/lab-deps.sh [--torch]
set -eu

torch=0
for arg in "$@"; do
	case $arg in
	--torch) torch=1 ;;
	-h | --help)
		sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "lab-deps: unknown argument $arg (usage: $0 [--torch])" >&2
		exit 2
		;;
	esac
done

missing=""
norecommends=""
need() { # need COMMAND PACKAGE
	command -v "$1" >/dev/null 2>&1 || missing="$missing $2"
}
need ip iproute2
need tc iproute2
need ethtool ethtool
need iperf3 iperf3
need mptcpize mptcpd
need mpirun openmpi-bin
need mpicc libopenmpi-dev
if [ "$torch" -eq 1 ]; then
	# The gloo system runs Debian's torch with the system Python (a pyenv or
	# venv python3 on PATH may lack it): check what it imports.
	# Its recommends (libtorch-dev, build-essential, ...) are not needed.
	if ! /usr/bin/python3 -c 'import numpy, torch.distributed as d; assert d.is_gloo_available()' >/dev/null 2>&1; then
		norecommends="python3-torch"
	fi
fi

[ -z "$missing$norecommends" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "lab-deps: missing:$missing $norecommends; run this script as root to install them" >&2
	exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "lab-deps: missing:$missing $norecommends; no apt-get here: install them with your package manager" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
if [ -n "$missing" ]; then
	# shellcheck disable=SC2086 # word splitting of the package list is intended
	pkgs=$(printf '%s\n' $missing | sort -u | tr '\n' ' ')
	echo "lab-deps: installing $pkgs" >&2
	# shellcheck disable=SC2086
	apt-get install -y -qq $pkgs >/dev/null
fi
if [ -n "$norecommends" ]; then
	echo "lab-deps: installing $norecommends (without its recommends)" >&2
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $norecommends >/dev/null
fi
echo "lab-deps: done" >&2
