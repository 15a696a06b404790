#!/bin/bash
# producer_case.sh — the producer changes what it says it changes: one
# iteration on a fresh graph, then the weight file is compared with the
# original byte by byte.
#
#   producer_case.sh BINDIR
#
# contiguous K%: exactly ceil(K% of the weight pages) pages differ, the
#   first ones, --per-page weights in each;
# random K%: as many pages, --per-page weights in each;
# uniform K%: exactly round(K% of the weights) weights differ;
# 0%: nothing differs. The header page never changes.
set -u
bindir=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gunrock-prod.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
"$bindir/gunrock-graph" rmat --scale=10 --edge-factor=8 --seed=5 -o "$tmp/g" >/dev/null || exit 1
edges=$(( ($(stat -c %s "$tmp/g.wgt") - 4096) / 4 ))
pages=$(( (edges * 4 + 4095) / 4096 ))
fail=0

# changed SLOT_BYTES: prints "<distinct pages> <distinct 4-byte slots> <first page> <last page>"
changed() {
    cmp -l "$tmp/orig.wgt" "$tmp/g.wgt" | awk '
        { off = $1 - 1; page[int(off / 4096)] = 1; slot[int(off / 4)] = 1 }
        END {
            np = 0; ns = 0; lo = -1; hi = -1
            for (p in page) { np++; if (lo < 0 || p + 0 < lo) lo = p + 0; if (p + 0 > hi) hi = p + 0 }
            for (s in slot) ns++
            print np, ns, lo, hi
        }'
}

run() {   # run PATTERN PERCENT PER_PAGE
    cp "$tmp/g.wgt" "$tmp/orig.wgt"
    "$bindir/producer" --pattern="$1" --percent="$2" --per-page="$3" --iterations=1 --seed=11 "$tmp/g.wgt" \
        >"$tmp/out" || { echo "producer_case.sh: producer $1 $2% failed" >&2; fail=1; return 1; }
    read -r np ns lo hi < <(changed)
}

expect() {   # expect WHAT GOT WANT
    if [ "$2" != "$3" ]; then
        echo "producer_case.sh: $1: got $2, expected $3" >&2
        fail=1
    fi
}

want_pages=$(( (pages * 25 + 99) / 100 ))
run contiguous 25 4 && {
    expect "contiguous 25%: pages changed" "$np" "$want_pages"
    expect "contiguous 25%: weights changed" "$ns" $((want_pages * 4))
    expect "contiguous 25%: first page" "$lo" 1
    expect "contiguous 25%: last page" "$hi" "$want_pages"
}
run random 25 4 && {
    expect "random 25%: pages changed" "$np" "$want_pages"
    expect "random 25%: weights changed" "$ns" $((want_pages * 4))
    [ "$lo" -ge 1 ] || expect "random 25%: the header page" "$lo" ">= 1"
}
want_weights=$(awk -v e="$edges" 'BEGIN { printf "%d", e * 0.01 + 0.5 }')
run uniform 1 4 && expect "uniform 1%: weights changed" "$ns" "$want_weights"
run contiguous 0 4 && expect "0%: bytes changed" "$np" 0
grep -q "PRODUCER iterations=1 pages_per_iter=$want_pages.0" <(cp "$tmp/orig.wgt" "$tmp/g.wgt";
    "$bindir/producer" --pattern=contiguous --percent=25 --iterations=1 "$tmp/g.wgt") ||
    { echo "producer_case.sh: the PRODUCER line does not count $want_pages pages" >&2; fail=1; }
# A bad file is refused, naming it.
head -c 100 "$tmp/orig.wgt" >"$tmp/short.wgt"
"$bindir/producer" --iterations=1 "$tmp/short.wgt" 2>"$tmp/err" && { echo "producer_case.sh: a truncated file was accepted" >&2; fail=1; }
grep -q "short.wgt: offset 100: truncated" "$tmp/err" || { echo "producer_case.sh: unexpected error: $(cat "$tmp/err")" >&2; fail=1; }
[ $fail -eq 0 ] && echo "producer_case.sh: $pages weight pages, $edges weights: all as expected"
exit $fail
