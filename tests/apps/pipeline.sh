#!/usr/bin/env bash
# A shell pipeline over a generated tree, once without and once with the
# shim (every file mapping managed): sort, grep -r, tar (create, list,
# extract), cp -r, then checksums of everything produced. The outputs must
# be byte-identical.
#   pipeline.sh PRELOAD WORKDIR
set -u
preload=$1 work=$2
rm -rf "$work" && mkdir -p "$work/tree"
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 LC_ALL=C
# 200 text files in 10 directories, a few large ones, deterministic.
awk -v dir="$work/tree" 'BEGIN { srand(7);
  for (f = 0; f < 200; f++) {
    d = sprintf("%s/dir%d", dir, f % 10); system("mkdir -p " d);
    path = sprintf("%s/f%03d.txt", d, f); n = (f % 25 == 0) ? 20000 : 50 + f * 3;
    for (l = 0; l < n; l++) printf "%08x %s %d %d\n", int(rand() * 2^31), (rand() < 0.1 ? "needle" : "hay"), f, l >> path;
    close(path) } }'

run() {
  local out=$work/$1
  mkdir -p "$out"
  (
    cd "$work"
    if [ -n "${2:-}" ]; then export LD_PRELOAD=$2 GAIA_MIN_MAP_KB=4; fi
    cat tree/dir*/f*.txt | sort -k2,2 -k1,1 > "$out/sorted" &&
    sort -m -u tree/dir3/*.txt | sort -r | head -c 100000 > "$out/merged" &&
    grep -r -c needle tree | sort > "$out/counts" &&
    grep -r -n -E '^[0-9a-f]{7}0 needle' tree | sort > "$out/lines" &&
    tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$out/tree.tar" tree &&
    tar -tvf "$out/tree.tar" > "$out/listing" &&
    mkdir -p "$out/x" && tar -xf "$out/tree.tar" -C "$out/x" &&
    cp -r tree "$out/copy" && cp "$out/sorted" "$out/sorted.copy" &&
    (cd "$out" && find x copy -type f | sort | xargs sha256sum > sums)
  ) 2>"$work/$1.err"
}
run plain || { echo "pipeline: FAIL: without the shim"; cat "$work/plain.err"; exit 1; }
run shim "$preload" || { echo "pipeline: FAIL: under the shim"; cat "$work/shim.err"; exit 1; }
fail=0
for f in sorted merged counts lines tree.tar listing sums sorted.copy; do
  if ! cmp -s "$work/plain/$f" "$work/shim/$f"; then echo "pipeline: FAIL: $f differs"; fail=1; fi
done
[ -s "$work/plain/lines" ] && [ -s "$work/plain/sums" ] || { echo "pipeline: FAIL: empty results"; fail=1; }
if grep -E 'gaia\[[0-9]+\]: (error|warning)' "$work/shim.err"; then fail=1; fi
echo "pipeline: $(wc -l < "$work/plain/sorted") lines sorted, $(wc -l < "$work/plain/sums") files checked, tar $(stat -c %s "$work/plain/tree.tar") bytes"
[ $fail = 0 ] || exit 1
rm -rf "$work"
echo "pipeline: ok (byte-identical with and without the shim)"
