#!/bin/sh
# full_device_snapshot.sh PROGRAM — run full_device with GAIA_STATS to a
# file: it must pass, and its sync of stream b must have been a snapshot
# release (counter snapshot_releases at least 1). A sync that waited for
# the device before releasing would pass the program's own checks without
# ever comparing pages next to the running kernel.
prog=$1
prog_asan_options=${ASAN_OPTIONS-}
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gaia-full-device-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
ASAN_OPTIONS="$prog_asan_options" GAIA_STATS="$tmp/stats" "$prog"
rc=$?
[ "$rc" -eq 0 ] || exit "$rc"
n=$(sed -n 's/^gaia: snapshot_releases \([0-9]*\) .*/\1/p' "$tmp/stats")
if [ -z "$n" ] || [ "$n" -lt 1 ]; then
    echo "FAIL: the sync of stream b was no snapshot release (snapshot_releases ${n:-missing}):" >&2
    cat "$tmp/stats" >&2
    exit 1
fi
echo "snapshot_releases $n"
