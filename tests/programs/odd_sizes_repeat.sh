#!/bin/sh
# odd_sizes_repeat.sh PROGRAM RUNS [ARG] — run odd_sizes (with ARG, e.g.
# churn) RUNS times (GAIA_LOG=info in the environment). Every run must pass, and its log must say, for each
# file the program printed ("file PATH SIZE"), that the file's replica is
# "at its own address" ("replica on device N, at its own address"), and
# never "managed memory": the backing is the one
# asked for (GAIA_BACKING=vmm) in every run, whatever the file's size.
prog=$1
runs=${2:-50}
arg=${3-}
# In the sanitizer builds the environment preloads the sanitizer into every
# process: the shell's own helpers (mktemp, grep) are not ours to check
# for leaks; the program is, with the options it was given.
prog_asan_options=${ASAN_OPTIONS-}
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gaia-odd-sizes-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# Linux 5.13 and later move file mappings with MREMAP_DONTUNMAP: there the
# shim must find that out (its probe) and never leave a range free.
kernel=$(uname -r)
kmajor=${kernel%%.*}
kminor=${kernel#*.}
kminor=${kminor%%[!0-9]*}
dontunmap=0
if [ "$kmajor" -gt 5 ] || { [ "$kmajor" -eq 5 ] && [ "$kminor" -ge 13 ]; }; then
    dontunmap=1
fi
i=1
while [ "$i" -le "$runs" ]; do
    ASAN_OPTIONS="$prog_asan_options" "$prog" $arg >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" -eq 77 ]; then
        cat "$tmp/out" "$tmp/err"
        exit 77
    fi
    if [ "$rc" -ne 0 ]; then
        echo "FAIL: run $i of $runs exited $rc"
        cat "$tmp/out" "$tmp/err"
        exit 1
    fi
    if [ "$dontunmap" -eq 1 ] && grep -q "refuses MREMAP_DONTUNMAP" "$tmp/err"; then
        echo "FAIL: run $i of $runs: Linux $kernel takes MREMAP_DONTUNMAP for file mappings, the shim says not:"
        grep "MREMAP_DONTUNMAP" "$tmp/err"
        exit 1
    fi
    if grep -q "managed memory" "$tmp/err"; then
        echo "FAIL: run $i of $runs: a file got managed memory, not vmm:"
        grep "managed memory" "$tmp/err"
        exit 1
    fi
    n=0
    while read -r word path size; do
        [ "$word" = file ] || continue
        n=$((n + 1))
        if ! grep -F "$path" "$tmp/err" | grep -q "replica on device [0-9]*, at its own address"; then
            echo "FAIL: run $i of $runs: no \"replica ... at its own address\" line for $path ($size bytes); its log lines:"
            grep -F "$path" "$tmp/err"
            exit 1
        fi
    done <"$tmp/out"
    if [ "$n" -eq 0 ]; then
        echo "FAIL: run $i of $runs printed no files"
        cat "$tmp/out"
        exit 1
    fi
    i=$((i + 1))
done
echo "ok: $runs runs, every file at its own address"
