#!/bin/sh
# build-capi.sh: builds the C ABI of multirail's communicator.
#
#   sh scripts/build-capi.sh [DIR]    (from the root of the repository)
#
# writes build/libmultirail.so (go build -buildmode=c-shared ./capi/lib)
# and build/multirail.h (a copy of the hand-written capi/multirail.h), and
# fails unless the library exports exactly the mr_* functions the header
# declares: the linker version script capi/lib/exports.map hides
# everything else (the Go runtime, the cgo shims), since one process may
# hold other Go libraries too (golang/go#18976). docs/capi.md tells how to
# compile and link against it. DIR (an absolute path, or relative to the
# repository's root) replaces build/, for tests that must not touch the
# checkout's build/.
set -eu

cd "$(dirname "$0")/.."
root="$(pwd)"

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
	PATH="/usr/local/go/bin:$PATH"
fi
for tool in go gcc nm; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "build-capi: $tool not found on PATH ($PATH)" >&2
		exit 1
	fi
done

out="${1:-build}"

case "$root$out" in
*[[:space:]]*)
	# -extldflags is split at spaces.
	echo "build-capi: the repository's path ($root) or the output directory ($out) contains white space; move it" >&2
	exit 1
	;;
esac

mkdir -p "$out"
rm -f "$out/libmultirail.so" "$out/libmultirail.h" "$out/multirail.h"
CGO_ENABLED=1 go build -buildmode=c-shared -trimpath \
	-ldflags="-extldflags=-Wl,--version-script=$root/capi/lib/exports.map" \
	-o "$out/libmultirail.so" ./capi/lib
# go build writes its own header of the cgo shims beside the library: not
# the interface (capi/multirail.h is).
rm -f "$out/libmultirail.h"
cp capi/multirail.h "$out/multirail.h"

exported="$(nm -D --defined-only "$out/libmultirail.so" | awk 'NF >= 3 { print $3 }' | sed 's/@.*//' | sort -u)"
others="$(printf '%s\n' "$exported" | grep -v '^mr_' || true)"
if [ -n "$others" ]; then
	echo "build-capi: $out/libmultirail.so exports symbols other than mr_*:" >&2
	printf '%s\n' "$others" | head -20 >&2
	exit 1
fi
declared="$(sed 's:/\*.*\*/::' capi/multirail.h | grep -oE 'mr_[a-z_0-9]+[[:space:]]*\(' | sed 's/[[:space:]]*($//' | sort -u)"
missing="$(printf '%s\n' "$declared" | while read -r f; do
	printf '%s\n' "$exported" | grep -qx "$f" || echo "$f"
done)"
if [ -n "$missing" ]; then
	echo "build-capi: capi/multirail.h declares functions the library does not export:" >&2
	printf '%s\n' "$missing" >&2
	exit 1
fi
extra="$(printf '%s\n' "$exported" | while read -r f; do
	printf '%s\n' "$declared" | grep -qx "$f" || echo "$f"
done)"
if [ -n "$extra" ]; then
	echo "build-capi: the library exports functions capi/multirail.h does not declare:" >&2
	printf '%s\n' "$extra" >&2
	exit 1
fi

n="$(printf '%s\n' "$exported" | wc -l | tr -d ' ')"
size="$(wc -c <"$out/libmultirail.so" | tr -d ' ')"
case "$out" in
/*) abs="$out" ;;
*) abs="$root/$out" ;;
esac
echo "build-capi: built $abs/libmultirail.so ($size bytes, exports exactly the $n mr_* functions of the header) and $abs/multirail.h"
echo "build-capi: compile with: gcc -I $abs prog.c -L $abs -lmultirail -Wl,-rpath,$abs"
