#!/usr/bin/env bash
# A one-node Slurm on this machine, for tests and for trying `srun` by hand.
# Root only; needs Debian's slurmctld, slurmd and slurm-client (scripts/comm-deps.sh).
#
#   scripts/slurm-local.sh up     [DIR]   start slurmctld + slurmd, wait until the node is idle
#   scripts/slurm-local.sh down   [DIR]   stop both (by pid file), wait until they are gone
#   scripts/slurm-local.sh status [DIR]   exit 0 when both run and the node answers, 1 when not
#
# DIR defaults to /tmp/multirail-slurm. Nothing under /etc/slurm is read or written: slurm.conf,
# state, spool, logs and pid files all live in DIR. srun/sinfo/squeue find this cluster through
# SLURM_CONF, which `up` and `status` print on stdout as one line for the shell:
#
#   eval "$(sudo scripts/slurm-local.sh up)"      # export SLURM_CONF=/tmp/multirail-slurm/slurm.conf
#   srun -n 4 -O env | grep SLURM_PROCID
#   scripts/slurm-local.sh down
#
# Everything else (progress, errors, log tails) goes to stderr.
# auth/none + cred/none (no munged), proctrack/pgid + task/none (no cgroups), one node named after
# `hostname -s` with the CPU/memory line of `slurmd -C`, a partition "debug" with OverSubscribe=FORCE
# (`srun -O` runs more tasks than CPUs).
#
# Environment:
#   SLURM_LOCAL_CTLD_PORT, SLURM_LOCAL_D_PORT  ports of slurmctld and slurmd (default: 6817 and
#                                  6818, or the next free pair above them when those are taken);
#                                  several instances in different DIRs can run side by side
#   SLURM_LOCAL_TIMEOUT            seconds `up` waits for the node to be idle (default 60)
#   SLURM_LOCAL_OWNER_PID          `up` leaves a watcher that runs `down` once this process is gone
#                                  (a test binary passes its own pid: no daemons outlive it, even
#                                  when it dies without cleaning up)
set -euo pipefail

DIR=${2:-/tmp/multirail-slurm}
case $DIR in /*) ;; *) DIR=$(pwd)/$DIR ;; esac # SLURM_CONF must hold for callers elsewhere
CONF=$DIR/slurm.conf
TIMEOUT=${SLURM_LOCAL_TIMEOUT:-60}

say() { echo "slurm-local: $*" >&2; }
die() {
	say "$*"
	exit 1
}

alive() { # alive PID [NAME]: PID runs (not a zombie) and, given NAME, is that program
	local st comm
	[ -n "$1" ] && [ -r "/proc/$1/stat" ] || return 1
	# field 3 of /proc/PID/stat (after the parenthesised name) is the state
	st=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
	case $st in '' | Z | X | x) return 1 ;; esac
	if [ -n "${2:-}" ]; then
		comm=$(cat "/proc/$1/comm" 2>/dev/null)
		[ "$comm" = "$2" ] || return 1
	fi
	return 0
}

pid_of() { # pid_of FILE [NAME]: the pid in FILE when that process is alive, else nothing
	local p
	[ -f "$1" ] || return 0
	p=$(tr -dc 0-9 <"$1")
	if alive "$p" "${2:-}"; then echo "$p"; fi
	return 0
}

node_state() { # the state sinfo reports for the node, or nothing
	SLURM_CONF=$CONF timeout 10 sinfo -h -o %t 2>/dev/null | head -n 1 || true
}

logs() { # the last lines of both daemons' output (the log file when the output is empty)
	local d f
	for d in ctld d; do
		f=$DIR/log/$d.out
		[ -s "$f" ] || f=$DIR/log/$d.log
		[ -s "$f" ] || continue
		echo "--- last lines of $f" >&2
		tail -n 12 "$f" >&2
	done
}

port_busy() { # port_busy PORT: something listens on TCP PORT
	if command -v ss >/dev/null 2>&1; then
		[ -n "$(ss -Htln "sport = :$1" 2>/dev/null)" ]
	else
		# /proc/net/tcp{,6}: local port in hex, state 0A = LISTEN
		local hex
		hex=$(printf '%04X' "$1")
		cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk -v h=":$hex" '$2 ~ h"$" && $4 == "0A" {f=1} END {exit !f}'
	fi
}

conf_value() { # conf_value KEY: the value of KEY= in $CONF
	sed -n "s/^$1=\([^ ]*\).*/\1/p" "$CONF" 2>/dev/null | head -n 1
}

stop() { # cancel leftover jobs, stop both daemons of DIR, wait up to 15 s for them to exit
	local f p pids="" jobs
	if [ -n "$(pid_of "$DIR/ctld.pid" slurmctld)" ] && [ -n "$(pid_of "$DIR/d.pid" slurmd)" ]; then
		jobs=$(SLURM_CONF=$CONF timeout 5 squeue -h -o %A 2>/dev/null || true)
		if [ -n "$jobs" ]; then
			say "cancelling jobs still running: $(tr '\n' ' ' <<<"$jobs")"
			# shellcheck disable=SC2086
			SLURM_CONF=$CONF timeout 5 scancel $jobs 2>/dev/null || true
			for _ in $(seq 50); do
				[ -z "$(SLURM_CONF=$CONF timeout 5 squeue -h -o %A 2>/dev/null || true)" ] && break
				sleep 0.1
			done
		fi
	fi
	for f in ctld:slurmctld d:slurmd; do
		p=$(pid_of "$DIR/${f%%:*}.pid" "${f#*:}")
		# a daemon stopped before it wrote its pid file: the pid it was launched with
		[ -n "$p" ] || p=$(pid_of "$DIR/${f%%:*}.launched" "${f#*:}")
		if [ -n "$p" ]; then
			kill "$p" 2>/dev/null || true
			pids="$pids $p"
		fi
	done
	for _ in $(seq 150); do
		local running=""
		for p in $pids; do if alive "$p"; then running="$running $p"; fi; done
		[ -z "$running" ] && break
		sleep 0.1
	done
	for p in $pids; do
		if alive "$p"; then
			say "pid $p did not exit in 15 s after SIGTERM; sending SIGKILL"
			kill -9 "$p" 2>/dev/null || true
		fi
	done
	rm -f "$DIR/ctld.pid" "$DIR/d.pid" "$DIR"/*.launched
	return 0
}

status() {
	local c d st
	c=$(pid_of "$DIR/ctld.pid" slurmctld)
	d=$(pid_of "$DIR/d.pid" slurmd)
	if [ -z "$c" ] || [ -z "$d" ]; then
		say "not running in $DIR (slurmctld: ${c:-down}, slurmd: ${d:-down})"
		return 1
	fi
	st=$(node_state)
	say "running in $DIR: slurmctld pid $c, slurmd pid $d, node state ${st:-unknown}"
	echo "export SLURM_CONF=$CONF"
	[ "$st" = idle ] || [ "$st" = mix ] || [ "$st" = alloc ]
}

write_conf() {
	local host node addr ctld_port d_port
	host=$(hostname -s)
	[ -n "$host" ] || die "hostname -s printed nothing"
	# slurmd -C: "NodeName=vm CPUs=2 Boards=1 ... RealMemory=24105" then "UpTime=...":
	# keep the first line's hardware fields, set our own NodeName.
	node=$(slurmd -C 2>/dev/null | head -n 1 | tr ' ' '\n' |
		grep -E '^(CPUs|Boards|SocketsPerBoard|CoresPerSocket|ThreadsPerCore|RealMemory)=' | tr '\n' ' ') || true
	if [ -z "$node" ]; then
		say "slurmd -C printed no hardware line; using CPUs=$(nproc)"
		node="CPUs=$(nproc)"
	fi
	# When the host name does not resolve, name the loopback address.
	addr=""
	if ! getent hosts "$host" >/dev/null 2>&1; then
		addr=127.0.0.1
	fi
	ctld_port=${SLURM_LOCAL_CTLD_PORT:-}
	d_port=${SLURM_LOCAL_D_PORT:-}
	if [ -z "$ctld_port" ] && [ -z "$d_port" ]; then
		ctld_port=6817
		while port_busy "$ctld_port" || port_busy $((ctld_port + 1)); do
			ctld_port=$((ctld_port + 2))
			[ "$ctld_port" -lt 7000 ] || die "no free pair of ports in 6817-6999"
		done
		d_port=$((ctld_port + 1))
	fi
	ctld_port=${ctld_port:-6817}
	d_port=${d_port:-6818}
	port_busy "$ctld_port" && die "port $ctld_port (slurmctld) is taken: set SLURM_LOCAL_CTLD_PORT"
	port_busy "$d_port" && die "port $d_port (slurmd) is taken: set SLURM_LOCAL_D_PORT"

	mkdir -p "$DIR"
	cat >"$CONF.tmp" <<EOF
# written by scripts/slurm-local.sh $(date -u +%Y-%m-%dT%H:%M:%SZ); a one-node Slurm in $DIR
ClusterName=multirail
SlurmctldHost=$host${addr:+($addr)}
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
AuthType=auth/none
CredType=cred/none
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldLogFile=$DIR/log/ctld.log
SlurmdLogFile=$DIR/log/d.log
SlurmctldPidFile=$DIR/ctld.pid
SlurmdPidFile=$DIR/d.pid
JobAcctGatherType=jobacct_gather/none
MailProg=/bin/true
MpiDefault=none
ReturnToService=2
NodeName=$host ${addr:+NodeAddr=$addr }$node
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
EOF
	mv "$CONF.tmp" "$CONF"
}

start_daemon() { # start_daemon NAME OUTFILE CMD...: detached from this script, survives its exit
	local name=$1 out=$2
	shift 2
	# setsid: own session, so neither a terminal hang-up nor a signal to the
	# caller's process group reaches it; stdio on files, so a caller that reads
	# this script's stdout (a Go test) is not held open by the daemon.
	setsid "$@" </dev/null >"$out" 2>&1 &
	echo $! >"$DIR/$name.launched"
}

kill_watcher() { # stop the watcher of DIR (unless this is the watcher, which removed its pid file)
	local w
	w=$(pid_of "$DIR/watch.pid" bash)
	if [ -n "$w" ] && [ "$w" != "$$" ]; then kill "$w" 2>/dev/null || true; fi
	rm -f "$DIR/watch.pid"
}

watch() { # a detached watcher that runs `down` once SLURM_LOCAL_OWNER_PID has exited
	local owner=${SLURM_LOCAL_OWNER_PID:-} self
	[ -n "$owner" ] || return 0
	alive "$owner" || die "SLURM_LOCAL_OWNER_PID=$owner is not a running process"
	[ -z "$(pid_of "$DIR/watch.pid" bash)" ] || return 0
	self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
	# shellcheck disable=SC2016 # expanded by the watcher's shell
	setsid bash -c 'while [ -d "/proc/$1" ]; do sleep 1; done
		rm -f "$2/watch.pid"
		echo "owner $1 exited; stopping"
		exec bash "$3" down "$2"' slurm-local-watch "$owner" "$DIR" "$self" \
		</dev/null >>"$DIR/log/watch.out" 2>&1 &
	echo $! >"$DIR/watch.pid"
}

up() {
	[ "$(id -u)" -eq 0 ] || die "run as root (slurmd runs jobs as any user; this setup uses SlurmUser=root)"
	local t
	for t in slurmctld slurmd srun sinfo; do
		command -v "$t" >/dev/null 2>&1 || die "$t not found: install slurmctld, slurmd and slurm-client (sh scripts/comm-deps.sh)"
	done
	command -v setsid >/dev/null 2>&1 || die "setsid not found (util-linux)"

	local c d
	c=$(pid_of "$DIR/ctld.pid" slurmctld)
	d=$(pid_of "$DIR/d.pid" slurmd)
	if [ -n "$c" ] && [ -n "$d" ] && [ -f "$CONF" ]; then
		say "already running in $DIR (slurmctld pid $c, slurmd pid $d)"
	else
		if [ -n "$c" ] || [ -n "$d" ]; then
			say "only one daemon is running in $DIR (slurmctld: ${c:-down}, slurmd: ${d:-down}); restarting both"
			stop
		elif [ -f "$DIR/ctld.pid" ] || [ -f "$DIR/d.pid" ]; then
			say "removing stale pid files in $DIR"
		fi
		kill_watcher
		rm -rf "$DIR/state" "$DIR/spool" "$DIR/log" "$DIR/ctld.pid" "$DIR/d.pid" "$DIR"/*.launched
		write_conf
		mkdir -p "$DIR/state" "$DIR/spool" "$DIR/log"
		# -D: no fork of their own (start_daemon detaches them), so a failure
		# at start lands in ctld.out/d.out; -c: no state from an earlier run.
		start_daemon ctld "$DIR/log/ctld.out" slurmctld -D -c -f "$CONF"
		start_daemon d "$DIR/log/d.out" slurmd -D -f "$CONF"
	fi

	local i st="" lc ld
	lc=$(tr -dc 0-9 <"$DIR/ctld.launched" 2>/dev/null || true)
	ld=$(tr -dc 0-9 <"$DIR/d.launched" 2>/dev/null || true)
	for i in $(seq $((TIMEOUT * 5))); do
		st=$(node_state)
		if [ "$st" = idle ] || [ "$st" = mix ] || [ "$st" = alloc ]; then
			say "up in $DIR after $(((i - 1) / 5)) s: node $(hostname -s) $st, slurmctld port $(conf_value SlurmctldPort), slurmd port $(conf_value SlurmdPort)"
			watch
			echo "export SLURM_CONF=$CONF"
			return 0
		fi
		# A daemon that exited will not come back: fail now, not at the timeout.
		if [ $((i % 5)) -eq 0 ]; then
			if [ -n "$lc" ] && ! alive "$lc"; then
				say "slurmctld exited during start-up"
				logs
				stop
				exit 1
			fi
			if [ -n "$ld" ] && ! alive "$ld"; then
				say "slurmd exited during start-up (this machine may not run slurmd; see its log below)"
				logs
				stop
				exit 1
			fi
		fi
		sleep 0.2
	done
	say "the node did not become idle within $TIMEOUT s (last state: ${st:-no answer from slurmctld}); stopping"
	logs
	stop
	exit 1
}

down() {
	if [ ! -f "$DIR/ctld.pid" ] && [ ! -f "$DIR/d.pid" ] && [ ! -f "$DIR/ctld.launched" ] && [ ! -f "$DIR/watch.pid" ]; then
		say "not running in $DIR"
		return 0
	fi
	kill_watcher
	stop
	say "stopped in $DIR"
}

case ${1:-} in
up) up ;;
down) down ;;
status) status ;;
*)
	echo "usage: $0 up|down|status [DIR]   (DIR defaults to /tmp/multirail-slurm)" >&2
	exit 2
	;;
esac
