#!/bin/bash
# pair_case.sh — a producer/consumer test: a few iterations in lockstep,
# every one validated against the CPU Dijkstra on the file as the producer
# left it. 32 weights change in each chosen page, so that weights the GPU
# failed to see would show in the distances.
#
#   pair_case.sh BINDIR MODE PATTERN PERCENT [ITERATIONS]
#
# CONSUMER_PRELOAD / PRODUCER_PRELOAD pass through to run_pair.sh.
set -u
bindir=$1 mode=$2 pattern=$3 percent=$4 iterations=${5:-5}
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gunrock-pcase.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
"$bindir/gunrock-graph" rmat --scale=10 --edge-factor=8 --seed=3 -o "$tmp/g" >/dev/null || exit 1
cp "$tmp/g.wgt" "$tmp/orig.wgt"
out=$(PAIR_TIMEOUT=${PAIR_TIMEOUT:-100} bash "$here/run_pair.sh" "$bindir" "$tmp/g.csr" \
      "--mode=$mode --validate --verbose" \
      "--pattern=$pattern --percent=$percent --per-page=32 --iterations=$iterations --seed=9")
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "pair_case.sh: the pair failed (exit $rc)" >&2; exit 1; }
grep -q "RESULT mode=$mode iterations=$iterations .* validated=1" <<<"$out" ||
    { echo "pair_case.sh: the consumer did not validate $iterations iterations" >&2; exit 1; }
grep -q "PRODUCER iterations=$iterations" <<<"$out" || { echo "pair_case.sh: no PRODUCER line" >&2; exit 1; }
# The producer really changed the file (unless asked to change nothing).
if [ "$percent" != 0 ] && cmp -s "$tmp/g.wgt" "$tmp/orig.wgt"; then
    echo "pair_case.sh: the weight file did not change" >&2; exit 1
fi
exit 0
