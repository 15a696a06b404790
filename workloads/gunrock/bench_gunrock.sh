#!/bin/bash
# bench_gunrock.sh — the dynamic-graph sweep (README.md, "The sweep"): for
# each update pattern and each k, a producer changes k% of the weight file
# per iteration and sssp recomputes, in every mode:
#
#   copy           the whole weight array copied to the GPU every iteration
#   managed        the weights read into cudaMallocManaged memory every iteration
#   gaia-shared    mmap'ed files under libgaia.so, the producer under it too
#                  (the consumer learns the changed pages from the shared
#                  version table)
#   gaia-checksum  the same, the producer not under the shim (changes are
#                  found from the file's times and per-page checksums)
#
# Every iteration of every run is validated against a CPU Dijkstra. A run
# that fails (gaia mode on a GPU the mappings cannot reach, say) is shown
# as failed; the sweep goes on. Prints a table and BENCH lines, writes
# OUT/gunrock.csv and, with gnuplot, OUT/gunrock.png.
#
#   bench_gunrock.sh [--build=DIR] [--scale=S] [--edge-factor=F] [--iterations=N]
#                    [--percents=LIST] [--patterns=LIST] [--modes=LIST] [--out=DIR]
#                    [--preload=LIBS] [--quick]
#
# Defaults: build, scale 16 (64 Ki vertices, ~2 M stored edges, an 8 MiB
# weight file of 2048 pages), edge factor 16, 20 iterations, k in
# 0,1,5,10,25,50,75,100, patterns contiguous,uniform, all four modes,
# OUT = BUILD/workloads/gunrock/bench, LIBS (LD_PRELOAD of the gaia
# modes) = BUILD/libgaia.so. --quick: scale 9, 2 iterations, k in 0,1,50
# (a smoke test).
set -u
build=build scale=16 edge_factor=16 iterations=20
percents=0,1,5,10,25,50,75,100 patterns=contiguous,uniform modes=copy,managed,gaia-shared,gaia-checksum
out="" preload=""
for arg in "$@"; do
    case $arg in
    --build=*) build=${arg#*=} ;;
    --scale=*) scale=${arg#*=} ;;
    --edge-factor=*) edge_factor=${arg#*=} ;;
    --iterations=*) iterations=${arg#*=} ;;
    --percents=*) percents=${arg#*=} ;;
    --patterns=*) patterns=${arg#*=} ;;
    --modes=*) modes=${arg#*=} ;;
    --out=*) out=${arg#*=} ;;
    --preload=*) preload=${arg#*=} ;;
    --quick) scale=9 iterations=2 percents=0,1,50 ;;
    -h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_gunrock.sh: error: unknown argument '$arg'" >&2; exit 2 ;;
    esac
done
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$build" 2>/dev/null && pwd) || { echo "bench_gunrock.sh: error: no build directory (make first)" >&2; exit 1; }
bindir=$build/workloads/gunrock
lib=${preload:-$build/libgaia.so}
out=${out:-$bindir/bench}
for f in "$bindir/sssp" "$bindir/producer" "$bindir/gunrock-graph"; do
    [ -x "$f" ] || { echo "bench_gunrock.sh: error: $f is not built (make first)" >&2; exit 1; }
done
[ -f "${lib##*:}" ] || echo "bench_gunrock.sh: ${lib##*:} is missing: the gaia modes will fail" >&2
mkdir -p "$out" || exit 1
work=$(mktemp -d "${TMPDIR:-/tmp}/gunrock-bench.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
csv=$out/gunrock.csv
log=$out/gunrock.log
: >"$log"

export SIMGPU_WORKERS=${SIMGPU_WORKERS:-$(nproc)}
"$bindir/gunrock-graph" rmat --scale="$scale" --edge-factor="$edge_factor" --seed=1 -o "$work/g" >"$work/gen" ||
    { echo "bench_gunrock.sh: error: generating the graph failed" >&2; exit 1; }
cp "$work/g.wgt" "$work/orig.wgt"
read -r graph_line <"$work/gen"
graph_line=${graph_line%%;*}
pages=$(( ($(stat -c %s "$work/g.wgt") - 4096 + 4095) / 4096 ))
echo "graph: R-MAT scale $scale, edge factor $edge_factor: ${graph_line#*: }, $pages weight pages of 4 KiB"
echo "$iterations iterations per run, every one validated; SIMGPU_WORKERS=$SIMGPU_WORKERS"

IFS=, read -r -a percent_list <<<"$percents"
IFS=, read -r -a pattern_list <<<"$patterns"
IFS=, read -r -a mode_list <<<"$modes"
echo "pattern,percent,mode,status,ms_median,h2d_bytes_per_iter,validated,iterations,ms_mean" >"$csv"
t_start=$(date +%s)
for pattern in "${pattern_list[@]}"; do
    for k in "${percent_list[@]}"; do
        for mode in "${mode_list[@]}"; do
            case $mode in
            copy|managed) m=$mode cp_lib="" pp_lib="" ;;
            gaia-shared) m=gaia cp_lib=$lib pp_lib=$lib ;;
            gaia-checksum) m=gaia cp_lib=$lib pp_lib="" ;;
            *) echo "bench_gunrock.sh: error: unknown mode '$mode'" >&2; exit 2 ;;
            esac
            # A fresh weight file (a new inode) for every run.
            rm -f "$work/g.wgt" && cp "$work/orig.wgt" "$work/g.wgt"
            res=$(CONSUMER_PRELOAD=$cp_lib PRODUCER_PRELOAD=$pp_lib PAIR_TIMEOUT=${PAIR_TIMEOUT:-300} bash \
                  "$here/run_pair.sh" "$bindir" "$work/g.csr" "--mode=$m --validate" \
                  "--pattern=$pattern --percent=$k --iterations=$iterations --seed=7" 2>"$work/err")
            rc=$?
            { echo "== $pattern k=$k $mode: exit $rc"; echo "$res"; cat "$work/err"; } >>"$log"
            line=$(grep '^RESULT ' <<<"$res" | tail -1)
            field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$line"; }
            if [ -n "$line" ]; then
                ms=$(field ms_median) mean=$(field ms_per_iter) h2d=$(field h2d_bytes_per_iter)
                val=$(field validated) its=$(field iterations)
            else
                ms="" mean="" h2d="" val=0 its=0
            fi
            if [ $rc -eq 0 ] && [ -n "$line" ]; then
                status=ok
            elif [ -n "$line" ] && [ "$val" = 0 ]; then
                status=wrong
            else
                status=failed
                why=$(grep -m1 -E 'sssp:|producer:' "$work/err")
                echo "$mode|$pattern k=$k, exit $rc: ${why:-no message}" >>"$work/failures"
            fi
            echo "$pattern,$k,$mode,$status,$ms,$h2d,$val,$its,$mean" >>"$csv"
        done
    done
done
t_end=$(date +%s)
# One line per mode that failed: how often, and the first reason.
if [ -s "$work/failures" ]; then
    for mode in "${mode_list[@]}"; do
        n=$(grep -c "^$mode|" "$work/failures")
        [ "$n" -gt 0 ] || continue
        total=$(( ${#pattern_list[@]} * ${#percent_list[@]} ))
        first=$(grep -m1 "^$mode|" "$work/failures")
        echo "$mode: $n of $total runs failed; first: ${first#*|}"
    done
    echo "(every run's output: $log)"
fi

# ---- the table: one row per (pattern, k); per mode time and H2D per iteration
awk -F, -v modes="$modes" '
function human(b) {
    if (b == "" || b < 0) return "n/a"
    if (b >= 1048576) return sprintf("%.2f MiB", b / 1048576)
    if (b >= 1024) return sprintf("%.1f KiB", b / 1024)
    return sprintf("%d B", b)
}
function cell_ms(key) { return st[key] == "ok" ? sprintf("%.2f", ms[key]) : (st[key] == "" ? "-" : st[key]) }
function cell_b(key)  { return st[key] == "ok" ? human(h2d[key]) : "-" }
function ratio(a, b)  { return (st[a] == "ok" && st[b] == "ok" && ms[b] > 0) ? sprintf("%.2fx", ms[a] / ms[b]) : "-" }
NR == 1 { next }
{
    key = $1 SUBSEP $2 SUBSEP $3
    st[key] = $4; ms[key] = $5; h2d[key] = $6
    if (!(($1 SUBSEP $2) in seen)) { seen[$1 SUBSEP $2] = 1; rows[++nrows] = $1 SUBSEP $2 }
}
END {
    n = split(modes, m, ",")
    printf "%-10s %4s", "", ""
    for (i = 1; i <= n; i++) printf " | %-20s", m[i]
    printf " | %-20s\n", "gaia-shared speedup"
    printf "%-10s %4s", "pattern", "k%"
    for (i = 1; i <= n; i++) printf " | %8s %11s", "ms/it", "H2D/it"
    printf " | %8s %11s\n", "vs copy", "vs managed"
    for (r = 1; r <= nrows; r++) {
        split(rows[r], pk, SUBSEP)
        printf "%-10s %4s", pk[1], pk[2]
        for (i = 1; i <= n; i++) { key = rows[r] SUBSEP m[i]; printf " | %8s %11s", cell_ms(key), cell_b(key) }
        g = rows[r] SUBSEP "gaia-shared"
        printf " | %8s %11s\n", ratio(rows[r] SUBSEP "copy", g), ratio(rows[r] SUBSEP "managed", g)
    }
}' "$csv"
echo "(ms/it: median time per iteration: weights brought in, SSSP, distances copied back. H2D/it: bytes to the device"
echo " per iteration, simulated GPU's accounting; managed: migrations both ways. speedup: time of copy or managed"
echo " over gaia-shared's. failed: the run did not complete; wrong: a run gave wrong distances.)"
echo "sweep: $((t_end - t_start)) s; CSV: $csv; log: $log"

# ---- the plot
if command -v gnuplot >/dev/null 2>&1; then
    for pattern in "${pattern_list[@]}"; do
        for mode in "${mode_list[@]}"; do
            awk -F, -v p="$pattern" -v m="$mode" '$1 == p && $3 == m && $4 == "ok" { print $2, $5, ($6 > 0 ? $6 : "NaN") }' \
                "$csv" >"$work/$pattern.$mode.dat"
        done
    done
    plots_ms="" plots_b=""
    for pattern in "${pattern_list[@]}"; do
        dash=1
        [ "$pattern" = contiguous ] || dash=2
        for mode in "${mode_list[@]}"; do
            f=$work/$pattern.$mode.dat
            [ -s "$f" ] || continue
            plots_ms+="${plots_ms:+, }'$f' using 1:2 with linespoints dt $dash title '$mode ($pattern)'"
            plots_b+="${plots_b:+, }'$f' using 1:3 with linespoints dt $dash title '$mode ($pattern)'"
        done
    done
    if [ -n "$plots_ms" ]; then
        gnuplot <<EOF 2>>"$log"
set terminal pngcairo size 1300,600 font ",10"
set output '$out/gunrock.png'
set multiplot layout 1,2 title "Dynamic-graph SSSP, R-MAT scale $scale, $iterations iterations per point (simulated GPU; dashed: uniform weights)"
set xlabel "k: share of the weight file changed per iteration (%)"
set key outside below maxcols 2 font ",9"
set datafile missing "NaN"
set grid
set ylabel "median time per iteration (ms)"
plot $plots_ms
set logscale y
set ylabel "host-to-device bytes per iteration (0 not shown)"
plot $plots_b
unset multiplot
EOF
        [ -s "$out/gunrock.png" ] && echo "plot: $out/gunrock.png" || echo "plot: gnuplot failed (see $log)"
    else
        echo "plot: no completed runs to plot"
    fi
else
    echo "plot: skipped (gnuplot is not installed)"
fi

# ---- BENCH lines: k = 1%, contiguous pages, gaia with the producer under the shim
get() { awk -F, -v p="$1" -v k="$2" -v m="$3" -v c="$4" '$1 == p && $2 == k && $3 == m && $4 == "ok" { print $c }' "$csv"; }
copy_b=$(get contiguous 1 copy 6) gaia_b=$(get contiguous 1 gaia-shared 6)
copy_ms=$(get contiguous 1 copy 5) gaia_ms=$(get contiguous 1 gaia-shared 5)
if [ -n "$copy_b" ] && [ -n "$gaia_b" ] && awk "BEGIN { exit !($copy_b > 0 && $gaia_b >= 0) }"; then
    awk -v g="$gaia_b" -v c="$copy_b" 'BEGIN { printf "BENCH gunrock_h2d_ratio_k1 %.4f x\n", g / c }'
else
    echo "BENCH gunrock_h2d_ratio_k1 failed (no completed gaia-shared and copy runs at k=1, contiguous)"
fi
if [ -n "$copy_ms" ] && [ -n "$gaia_ms" ]; then
    awk -v g="$gaia_ms" -v c="$copy_ms" 'BEGIN { printf "BENCH gunrock_speedup_vs_copy_k1 %.2f x\n", c / g }'
else
    echo "BENCH gunrock_speedup_vs_copy_k1 failed (no completed gaia-shared and copy runs at k=1, contiguous)"
fi
all_ok=$(awk -F, 'NR > 1 && !($4 == "ok" && $7 == 1) { bad = 1 } END { print bad ? 0 : 1 }' "$csv")
echo "BENCH gunrock_validated $all_ok"
exit 0
