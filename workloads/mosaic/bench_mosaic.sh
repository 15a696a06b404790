#!/usr/bin/env bash
# bench_mosaic.sh — the mosaic workloads in every mode: tables, CSV, PNG
# plots, the collage itself, and BENCH lines.
#
#   bench_mosaic.sh [--build DIR] [--out DIR] [--scale N] [--repeat N]
#
# --scale multiplies the database (32768 tiny images, 257 MiB) and the
# stitch grid (4x8 tiles of 1592x512); the input picture stays 1024x768.
# Each mode runs --repeat times (best time kept; the first run is checked
# against the CPU reference).  gaia mode runs the same programs with
# LD_PRELOAD=DIR/libgaia.so; a mode that fails is reported as failed.
set -u
build=build
out=
scale=1
repeat=3
while [[ $# -gt 0 ]]; do
	case $1 in
	--build) build=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--scale) scale=$2; shift 2 ;;
	--repeat) repeat=$2; shift 2 ;;
	-h | --help) sed -n '2,12p' "$0"; exit 0 ;;
	*) echo "bench_mosaic: unknown argument $1" >&2; exit 2 ;;
	esac
done
[[ $scale =~ ^[1-9][0-9]*$ && $repeat =~ ^[1-9][0-9]*$ ]] || { echo "bench_mosaic: --scale and --repeat take positive integers" >&2; exit 2; }
build=$(cd "$build" && pwd) || exit 1
out=${out:-$build/bench-mosaic}
mkdir -p "$out/data" || exit 1
out=$(cd "$out" && pwd)
collage=$build/workloads/mosaic/collage
stitch=$build/workloads/mosaic/stitch
shim=$build/libgaia.so
for f in "$collage" "$stitch"; do
	[[ -x $f ]] || { echo "bench_mosaic: $f is missing (build first)" >&2; exit 1; }
done
[[ -f $shim ]] || echo "bench_mosaic: $shim is missing: gaia mode will fail" >&2

images=$((32768 * scale))
rows=$((4 * scale))
# simulated device memory: room for the database twice (copy mode, or the
# shim's device replicas) and the rest
db_mib=$((images * 8192 / 1048576))
export SIMGPU_MEM_MB=$((2 * db_mib + 256 > 1024 ? 2 * db_mib + 256 : 1024))

declare -A R     # R[<prog>.<mode>.<key>] = value, from the programs' key=value lines

# run_mode PROG MODE ARGS...: runs `repeat` times, keeps the best time
run_mode() {
	local prog=$1 mode=$2 i line kv k v best= pre=() status=ok
	shift 2
	if [[ $mode == gaia ]]; then
		rm -f "$out/$prog.gaia.stats"
		pre=(env "LD_PRELOAD=$shim" "GAIA_STATS=$out/$prog.gaia.stats")
	fi
	for ((i = 0; i < repeat; i++)); do
		local extra=()
		[[ $i -eq 0 ]] && extra=(--verify)
		line=$("${pre[@]}" "$@" "${extra[@]}" 2>"$out/$prog.$mode.err" | grep "^$prog: mode=")
		if [[ ${PIPESTATUS[0]} -ne 0 || $line != *"status=ok"* ]]; then
			status=failed
			break
		fi
		for kv in ${line#*: }; do
			k=${kv%%=*}
			v=${kv#*=}
			if [[ $k == time_s ]]; then
				[[ -z $best ]] || awk -v a="$v" -v b="$best" 'BEGIN { exit !(a < b) }' && best=$v
			elif [[ $i -eq 0 ]]; then
				R[$prog.$mode.$k]=$v
			fi
		done
	done
	R[$prog.$mode.status]=$status
	R[$prog.$mode.time_s]=${best:-nan}
	if [[ $status == failed ]]; then
		echo "  $prog $mode: failed: $(tail -n 1 "$out/$prog.$mode.err")"
	fi
	if [[ $mode == gaia && -f $out/$prog.gaia.stats ]]; then
		R[$prog.gaia.merged_pages]=$(awk '$1 == "gaia:" && $2 == "merged_pages" { print $3 }' "$out/$prog.gaia.stats")
		R[$prog.gaia.gaia_h2d_bytes]=$(awk '$1 == "gaia:" && $2 == "h2d_bytes" { print $3 }' "$out/$prog.gaia.stats")
	fi
}

val() { echo "${R[$1]:-n/a}"; }
mib() {
	local v=${R[$1]:-}
	[[ $v =~ ^[0-9]+$ ]] && awk -v b="$v" 'BEGIN { printf "%.1f", b / 1048576 }' || echo "${v:-n/a}"
}

echo "mosaic bench: scale $scale, $images database images, stitch grid ${rows}x8, best of $repeat"
echo "generating inputs in $out/data"
"$collage" gendb "$out/data/db" --images "$images" --seed 1 || exit 1
"$collage" genimage "$out/data/input.png" --width 1024 --height 768 --seed 1 || exit 1
"$stitch" gen "$out/data/tiles" --rows "$rows" --seed 1 || exit 1
cp "$out/data/input.png" "$out/collage_input.png"

echo "collage"
collage_modes=(cpu copy managed gaia)
for m in "${collage_modes[@]}"; do
	args=(run --db "$out/data/db" --input "$out/data/input.png" --mode "$m")
	[[ $m == copy ]] && args+=(--out "$out/collage.png")
	run_mode collage "$m" "$collage" "${args[@]}"
done
echo "stitch"
stitch_modes=(cpu managed gaia)
for m in "${stitch_modes[@]}"; do
	args=(run --tiles "$out/data/tiles" --out "$out/data/canvas_$m.pgm" --mode "$m")
	[[ $m == cpu ]] && args+=(--png "$out/stitch_canvas.png")
	run_mode stitch "$m" "$stitch" "${args[@]}"
done

# ---- tables and CSV
db_bytes=$(val collage.cpu.db_bytes)
echo
echo "collage: $images tiny images ($(mib collage.cpu.db_bytes) MiB database), 1024x768 input = 768 tiles"
printf "%-8s %-7s %9s %10s %11s %12s %10s %10s %10s %9s\n" mode status time_s read_MiB to_gpu_MiB gaia_h2d_MiB touched_MiB h2d_MiB uvm_faults identical
csv=$out/collage.csv
echo "mode,status,time_s,file_read_bytes,db_to_gpu_bytes,gaia_h2d_bytes,touched_bytes,h2d_bytes,uvm_faults,uvm_migrated_bytes,identical" >"$csv"
for m in "${collage_modes[@]}"; do
	printf "%-8s %-7s %9s %10s %11s %12s %10s %10s %10s %9s\n" "$m" "$(val collage.$m.status)" "$(val collage.$m.time_s)" \
		"$(mib collage.$m.file_read_bytes)" "$(mib collage.$m.db_to_gpu_bytes)" "$(mib collage.$m.gaia_h2d_bytes)" \
		"$(mib collage.$m.touched_bytes)" "$(mib collage.$m.h2d_bytes)" "$(val collage.$m.uvm_faults)" "$(val collage.$m.identical)"
	echo "$m,$(val collage.$m.status),$(val collage.$m.time_s),$(val collage.$m.file_read_bytes),$(val collage.$m.db_to_gpu_bytes),$(val collage.$m.gaia_h2d_bytes),$(val collage.$m.touched_bytes),$(val collage.$m.h2d_bytes),$(val collage.$m.uvm_faults),$(val collage.$m.uvm_migrated_bytes),$(val collage.$m.identical)" >>"$csv"
done
echo "  read: bytes the program read from the files itself; to_gpu: bytes the simulated GPU"
echo "  received (H2D copies + UVM migrations, less the program's own input copy; a byte the"
echo "  shim copies into managed memory and then migrates counts twice); gaia_h2d: the bytes the"
echo "  shim uploaded (its GAIA_STATS h2d_bytes); touched: distinct 4 KiB records the kernels read"

echo
echo "stitch: canvas $(val stitch.cpu.canvas), $(val stitch.managed.shared_pages) pages written by both sides"
printf "%-8s %-7s %9s %13s %13s %10s %10s %10s %9s\n" mode status time_s shared_pages merged_pages h2d_MiB d2h_MiB uvm_faults identical
csv=$out/stitch.csv
echo "mode,status,time_s,shared_pages,merged_pages,h2d_bytes,d2h_bytes,uvm_faults,uvm_migrated_bytes,identical" >"$csv"
for m in "${stitch_modes[@]}"; do
	printf "%-8s %-7s %9s %13s %13s %10s %10s %10s %9s\n" "$m" "$(val stitch.$m.status)" "$(val stitch.$m.time_s)" \
		"$(val stitch.$m.shared_pages)" "$(val stitch.$m.merged_pages)" "$(mib stitch.$m.h2d_bytes)" \
		"$(mib stitch.$m.d2h_bytes)" "$(val stitch.$m.uvm_faults)" "$(val stitch.$m.identical)"
	echo "$m,$(val stitch.$m.status),$(val stitch.$m.time_s),$(val stitch.$m.shared_pages),$(val stitch.$m.merged_pages),$(val stitch.$m.h2d_bytes),$(val stitch.$m.d2h_bytes),$(val stitch.$m.uvm_faults),$(val stitch.$m.uvm_migrated_bytes),$(val stitch.$m.identical)" >>"$csv"
done

# ---- plots (gnuplot; skipped with a note when it is not installed)
if command -v gnuplot >/dev/null; then
	gnuplot <<GP 2>"$out/gnuplot.err" || echo "plots: gnuplot failed, see $out/gnuplot.err"
set datafile separator ","
set terminal pngcairo size 800,480 noenhanced
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set grid ytics
set key below
set yrange [0:*]
set output "$out/collage_time.png"
set title "collage: time per mode (simulated GPU)"
set ylabel "seconds"
plot "$out/collage.csv" skip 1 using (strcol(2) eq "ok" ? \$3 : 1/0):xtic(1) title "time"
set output "$out/collage_bytes.png"
set title "collage: database bytes per mode"
set ylabel "MiB"
plot "$out/collage.csv" skip 1 using (strcol(2) eq "ok" ? \$4/1048576 : 1/0):xtic(1) title "read from the files by the program", \
     "" skip 1 using (strcol(2) eq "ok" ? (strcol(6) eq "n/a" ? \$5 : \$6)/1048576 : 1/0) title "to the GPU (gaia: what the shim uploaded)", \
     "" skip 1 using (strcol(2) eq "ok" ? \$7/1048576 : 1/0) title "records the kernels read"
set output "$out/stitch_time.png"
set title "stitch: time per mode (simulated GPU)"
set ylabel "seconds"
plot "$out/stitch.csv" skip 1 using (strcol(2) eq "ok" ? \$3 : 1/0):xtic(1) title "time"
GP
else
	echo "plots: gnuplot is not installed (make bench-mosaic installs gnuplot-nox as root); CSV only"
fi

# ---- BENCH lines
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.3f", a / b; else print "failed" }'; }
echo
ok_all=1
for m in "${collage_modes[@]}"; do
	[[ $(val collage.$m.status) == ok && $(val collage.$m.identical) == 1 ]] || ok_all=0
done
[[ $(val collage.gaia.status) == ok ]] || echo "note: collage gaia mode failed (see $out/collage.gaia.err)"
echo "BENCH collage_db_fraction_read $(
	read=$(val collage.gaia.gaia_h2d_bytes)
	[[ $read =~ ^[0-9]+$ ]] || read=$(val collage.gaia.db_to_gpu_bytes)
	if [[ $(val collage.gaia.status) == ok && $read =~ ^[0-9]+$ ]]; then
		awk -v a="$read" -v b="$db_bytes" 'BEGIN { printf "%.4f", a / b }'
	else echo failed; fi) fraction"
echo "BENCH collage_identical $ok_all bool"
ok_all=1
for m in "${stitch_modes[@]}"; do
	[[ $(val stitch.$m.status) == ok && $(val stitch.$m.identical) == 1 ]] || ok_all=0
done
[[ $(val stitch.gaia.status) == ok ]] || echo "note: stitch gaia mode failed (see $out/stitch.gaia.err)"
echo "BENCH stitch_identical $ok_all bool"
mp=$(val stitch.gaia.merged_pages)
[[ $(val stitch.gaia.status) == ok && $mp =~ ^[0-9]+$ ]] || mp=failed
echo "BENCH stitch_merged_pages $mp pages"
if [[ $(val stitch.gaia.status) == ok ]]; then
	echo "BENCH stitch_speedup_vs_managed $(ratio "$(val stitch.managed.time_s)" "$(val stitch.gaia.time_s)") x"
else
	echo "BENCH stitch_speedup_vs_managed failed x"
fi
echo
echo "files: $out/{collage,stitch}.csv, $out/{collage_time,collage_bytes,stitch_time}.png,"
echo "       $out/collage.png (the collage), $out/collage_input.png, $out/stitch_canvas.png"
