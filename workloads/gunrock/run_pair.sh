#!/bin/bash
# run_pair.sh — one run of the dynamic-graph experiment: a producer and an
# sssp consumer in lockstep (pairsync.h), each optionally under a preloaded
# library.
#
#   run_pair.sh BINDIR GRAPH.csr "SSSP ARGS" "PRODUCER ARGS"
#
# Environment: CONSUMER_PRELOAD, PRODUCER_PRELOAD (a library for LD_PRELOAD,
# or empty: none, whatever the caller's LD_PRELOAD), PAIR_TIMEOUT (seconds,
# default 300). Both programs' output passes through (their RESULT and
# PRODUCER lines). When one fails the other is stopped, so a consumer that
# dies never leaves a producer waiting. Exit: the consumer's status if it
# failed, else the producer's.
set -u
if [ $# -lt 2 ]; then
    echo "usage: $0 BINDIR GRAPH.csr \"SSSP ARGS\" \"PRODUCER ARGS\"" >&2
    exit 2
fi
bindir=$1
graph=$2
read -r -a cargs <<<"${3:-}"
read -r -a pargs <<<"${4:-}"
timeout_s=${PAIR_TIMEOUT:-300}
dir=$(mktemp -d "${TMPDIR:-/tmp}/gunrock-pair.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
sync=$dir/sync
wgt=${graph%.csr}.wgt

preload_env() {   # the env(1) arguments that give exactly this preload
    if [ -n "$1" ]; then echo "LD_PRELOAD=$1"; fi
}

timeout "$timeout_s" env -u LD_PRELOAD $(preload_env "${PRODUCER_PRELOAD:-}") \
    "$bindir/producer" --sync="$sync" "${pargs[@]}" "$wgt" &
ppid=$!
timeout "$timeout_s" env -u LD_PRELOAD $(preload_env "${CONSUMER_PRELOAD:-}") \
    "$bindir/sssp" --sync="$sync" "${cargs[@]}" "$graph" &
cpid=$!

wait -n -p first "$ppid" "$cpid"
rc=$?
if [ "$first" = "$cpid" ]; then
    crc=$rc
    [ "$crc" -ne 0 ] && kill "$ppid" 2>/dev/null
    wait "$ppid"
    prc=$?
else
    prc=$rc
    [ "$prc" -ne 0 ] && kill "$cpid" 2>/dev/null
    wait "$cpid"
    crc=$?
fi
if [ "$crc" -ne 0 ]; then
    exit "$crc"
fi
exit "$prc"
