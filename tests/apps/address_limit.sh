#!/usr/bin/env bash
# A Python program maps 400 small files and keeps them mapped under an
# address-space limit (ulimit -v 800 MiB) that it fits in with room to
# spare without the shim (address_limit.py). Under the shim, every file
# mapping managed (GAIA_MIN_MAP_KB=4), it must still fit: what the shim
# reserves beside each mapping counts against the program's limit, and
# with a 2 MiB span kept after each mapping it ran out (ENOMEM) at the
# 306th. Output must be identical with and without the shim,
# and the shim must have managed the mappings.
#   address_limit.sh PRELOAD WORKDIR
set -u
preload=$1 work=$2 here=$(dirname "$0")
python=$(command -v python3) || { echo "address_limit: SKIP: no python3 (apt-get install python3)"; exit 77; }
rm -rf "$work" && mkdir -p "$work/plain" "$work/shim"
limit_kb=$((800 * 1024)) count=400

( ulimit -v $limit_kb && "$python" "$here/address_limit.py" "$work/plain" $count ) >"$work/plain.out" 2>&1 ||
  { echo "address_limit: FAIL: without the shim:"; cat "$work/plain.out"; exit 1; }
( ulimit -v $limit_kb && LD_PRELOAD=$preload GAIA_MIN_MAP_KB=4 GAIA_STATS=1 \
    "$python" "$here/address_limit.py" "$work/shim" $count ) >"$work/shim.out" 2>"$work/shim.err"
rc=$?
managed=$(awk '$1 == "gaia:" && $2 == "managed_mappings" { s += $3 } END { print s + 0 }' "$work/shim.err")
echo "address_limit: $(cat "$work/plain.out"); under the shim: exit $rc, $managed mappings managed"
fail=0
if [ $rc -ne 0 ] || ! cmp -s "$work/plain.out" "$work/shim.out"; then
  echo "address_limit: FAIL: under the shim:"; cat "$work/shim.out"; grep -v '^gaia: ' "$work/shim.err" | tail -5; fail=1
fi
[ "$managed" -ge $count ] || { echo "address_limit: FAIL: only $managed mappings were managed"; fail=1; }
if grep -E 'gaia\[[0-9]+\]: (error|warning)' "$work/shim.err" | head -5 | grep .; then fail=1; fi
[ $fail = 0 ] || exit 1
rm -rf "$work"
echo "address_limit: ok"
