#!/bin/sh
# Tests the Python package multirail and its torch.distributed backend
# (python/tests, docs/torch.md): unit tests, then programs of 3 ranks under
# `multirail run`, torchrun (scripts/torchrun-wrapper.py) and plain env://:
# every method x dtype x op, DDP against gloo (3 and 2 ranks), every DDP
# option, torch's hooks, the loss-tolerant hook (calm and under emulated
# storms), DataLoader workers and a forked child, a killed rank, Ctrl-C.
# Exits non-zero on any failure. Without torch it fails under CI=true and
# otherwise runs only the unit tests that need no torch (and says so).
#
#   sh scripts/test-python.sh            (from the repository's root)
#   sh scripts/test-python.sh --only "unit,DDP vs gloo (multirail run -n 3)"
#
# It runs scripts/build-python.sh first (the library and the package in
# .venv, so that what is tested is this checkout; MULTIRAIL_PY_NO_BUILD=1
# skips it when .venv works), and builds build/multirail (the launcher). The
# summary goes to build/test-python.json.
set -eu

cd "$(dirname "$0")/.."
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
	PATH="/usr/local/go/bin:$PATH"
	export PATH
fi
PY=.venv/bin/python

if ! /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then
	if [ "${CI:-}" = "true" ]; then
		echo "test-python: torch is not importable by /usr/bin/python3: install python3-torch (sh scripts/comm-deps.sh --torch); CI=true: failing" >&2
		exit 1
	fi
	echo "test-python: torch is not installed (apt-get install -y python3-torch): SKIPPING every torch test; running the unit tests without torch only" >&2
	if [ ! -x "$PY" ]; then
		PY=/usr/bin/python3
	fi
	exec "$PY" -m unittest -v python/tests/test_unit.py
fi

if [ "${MULTIRAIL_PY_NO_BUILD:-}" != "1" ] || [ ! -x "$PY" ] || ! "$PY" -c 'import multirail._lib as L; L.lib()' >/dev/null 2>&1; then
	sh scripts/build-python.sh
fi
echo "test-python: building the launcher (go build -o build/multirail ./cmd/multirail)"
go build -o build/multirail ./cmd/multirail

# Every rank loads this checkout's library, whatever was installed before.
MULTIRAIL_LIB="$(pwd)/build/libmultirail.so"
export MULTIRAIL_LIB
exec "$PY" python/tests/run_tests.py --multirail build/multirail --json build/test-python.json "$@"
