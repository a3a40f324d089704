#!/bin/sh
# Builds the Python package multirail (python/) into .venv on a fresh machine,
# offline: the C library (sh scripts/build-capi.sh -> build/libmultirail.so),
# a virtual environment made from Debian's python3 with --system-site-packages
# (Debian's python3-torch stays visible; no package registry is needed), the
# package installed into it with pip --no-index --no-build-isolation, the
# library copied into the installed package, and a check that
# `.venv/bin/python -c "import multirail.torch"` works.
#
# Needs: Go (for the library), python3-venv; python3-torch for the torch
# backend (as root: sh scripts/comm-deps.sh --torch, or
# apt-get install -y python3-torch python3-venv).
# Environment: PYTHON (default /usr/bin/python3, Debian's: the first python3
# on PATH may be another interpreter without torch), VENV (default .venv).
set -eu

cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-/usr/bin/python3}"
VENV="${VENV:-.venv}"

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
	PATH="/usr/local/go/bin:$PATH"
	export PATH
fi

echo "build-python: the C library (sh scripts/build-capi.sh)"
sh scripts/build-capi.sh
test -f build/libmultirail.so || { echo "build-python: build/libmultirail.so missing after build-capi.sh" >&2; exit 1; }

if [ ! -x "$PYTHON" ]; then
	echo "build-python: $PYTHON not found; install Debian's python3 (apt-get install -y python3 python3-venv)" >&2
	exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
	echo "build-python: $PYTHON -m venv --system-site-packages $VENV"
	"$PYTHON" -m venv --system-site-packages "$VENV" || {
		echo "build-python: could not make the virtual environment; install python3-venv (apt-get install -y python3-venv)" >&2
		exit 1
	}
fi

root="$(pwd)"
case "$VENV" in
/*) vpy="$VENV/bin/python" ;;
*) vpy="$root/$VENV/bin/python" ;;
esac

echo "build-python: pip install --no-index --no-build-isolation ./python"
# pip builds in the source tree: build it from a copy so python/ stays clean.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp -R python/pyproject.toml python/README.md python/multirail "$tmp"/
rm -f "$tmp"/multirail/*.so
"$vpy" -m pip install --quiet --no-index --no-build-isolation --no-deps --force-reinstall "$tmp" || {
	echo "build-python: pip install failed; falling back to a .pth file pointing at python/" >&2
	site="$("$vpy" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
	echo "$root/python" >"$site/multirail-src.pth"
}

pkg="$(cd / && "$vpy" -c 'import multirail, os; print(os.path.dirname(multirail.__file__))')"
case "$pkg" in
*/site-packages/*) cp build/libmultirail.so "$pkg/libmultirail.so" ;;
*) echo "build-python: multirail imports from $pkg (a .pth install): it finds build/libmultirail.so itself" ;;
esac

echo "build-python: check: $VENV/bin/python -c 'import multirail.torch'"
(cd / && "$vpy" -c '
import multirail, multirail._lib as L
import torch
import multirail.torch
print("multirail", multirail.__version__, "from", multirail.__file__)
print("library", L.path())
print("torch", torch.__version__, "backend", "multirail", "registered")
') || {
	echo "build-python: import multirail.torch failed (is python3-torch installed? apt-get install -y python3-torch)" >&2
	exit 1
}
echo "build-python: ok; run programs with $VENV/bin/python"
