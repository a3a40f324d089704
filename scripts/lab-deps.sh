#!/bin/sh
# Install what `multirail lab` needs on Debian/Ubuntu, when it is missing:
#   iproute2 (ip, tc)   namespaces, veths, tbf, MPTCP endpoints  (required)
#   ethtool             offloads off on the rails                 (required unless --offloads)
#   iperf3              the competing stream of lab bench and lab load (else the Go stream)
#   openmpi-bin, libopenmpi-dev (mpirun, mpicc)                   (lab bench's openmpi-* systems)
# Idempotent: quiet and quick when everything is there. Run as root.
set -eu

missing=""
need() { # need COMMAND PACKAGE
	command -v "$1" >/dev/null 2>&1 || missing="$missing $2"
}
need ip iproute2
need tc iproute2
need ethtool ethtool
need iperf3 iperf3
need mpirun openmpi-bin
need mpicc libopenmpi-dev

[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "lab-deps: missing:$missing; run this script as root to install them" >&2
	exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "lab-deps: missing:$missing; no apt-get here: install them with your package manager" >&2
	exit 1
fi
# shellcheck disable=SC2086 # word splitting of the package list is intended
pkgs=$(printf '%s\n' $missing | sort -u | tr '\n' ' ')
echo "lab-deps: installing $pkgs" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq $pkgs >/dev/null
echo "lab-deps: done" >&2
