#!/bin/sh
# Install what the launcher tests need on Debian/Ubuntu, when it is missing:
#   openmpi-bin, libopenmpi-dev (mpirun, mpicc)      tests under real mpirun
#   slurmctld, slurmd, slurm-client (srun, sinfo)    a one-node Slurm (scripts/slurm-local.sh)
#   python3-torch (torchrun), python3-venv,          about 230 MB, 1-3 min; not installed by default
#     only with --torch                              (the PyTorch backend's tests: scripts/test-python.sh)
# Idempotent: quiet and quick when everything is there. Run as root.
# usage: sh scripts/comm-deps.sh [--torch]
set -eu

torch=0
for arg in "$@"; do
	case $arg in
	--torch) torch=1 ;;
	-h | --help)
		sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "comm-deps: unknown argument $arg (usage: $0 [--torch])" >&2
		exit 2
		;;
	esac
done

missing=""
need() { # need COMMAND PACKAGE
	command -v "$1" >/dev/null 2>&1 || missing="$missing $2"
}
need mpirun openmpi-bin
need mpicc libopenmpi-dev
need slurmctld slurmctld
need slurmd slurmd
need srun slurm-client
need sinfo slurm-client
if [ "$torch" -eq 1 ]; then
	# Debian's torchrun is /usr/bin/torchrun for the system Python; check the
	# module with that Python (a pyenv or venv python3 on PATH may lack it).
	if [ ! -x /usr/bin/torchrun ] || ! /usr/bin/python3 -c 'import torch.distributed.run' >/dev/null 2>&1; then
		missing="$missing python3-torch"
	fi
	/usr/bin/python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing="$missing python3-venv"
fi

[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "comm-deps: missing:$missing; run this script as root to install them" >&2
	exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "comm-deps: missing:$missing; no apt-get here: install them with your package manager" >&2
	exit 1
fi
# shellcheck disable=SC2086 # word splitting of the package list is intended
pkgs=$(printf '%s\n' $missing | sort -u | tr '\n' ' ')
echo "comm-deps: installing $pkgs" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# Debian's slurmd and slurmctld packages start their systemd units on install
# where systemd runs; policy-rc.d 101 keeps them stopped (scripts/slurm-local.sh
# starts its own daemons with its own slurm.conf). Only if none is set already.
policy=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
	policy=/usr/sbin/policy-rc.d
	printf '#!/bin/sh\nexit 101\n' >"$policy"
	chmod 755 "$policy"
fi
# shellcheck disable=SC2086
if ! apt-get install -y -qq --no-install-recommends $pkgs >/dev/null; then
	[ -n "$policy" ] && rm -f "$policy"
	echo "comm-deps: apt-get install $pkgs failed" >&2
	exit 1
fi
[ -n "$policy" ] && rm -f "$policy"
echo "comm-deps: done" >&2
