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

# run_mode PROG MODE ARGS...: runs `repeat` times, keeps the best time;
# results go to R[<label>.<mode>.<key>], label = $label or PROG
label=
run_mode() {
	local prog=$1 mode=$2 i line kv k v best= pre=() status=ok
	local key=${label:-$prog}
	shift 2
	if [[ $mode == gaia* ]]; then
		rm -f "$out/$key.$mode.stats"
		pre=(env "LD_PRELOAD=$shim" "GAIA_STATS=$out/$key.$mode.stats")
		# gaia-H: a device with HMM (the simulator's profile), regions
		# read through it (GAIA_BACKING=host)
		[[ $mode == gaia-H ]] && pre+=(SIMGPU_HMM=1 GAIA_BACKING=host)
	fi
	for ((i = 0; i < repeat; i++)); do
		local extra=()
		[[ $i -eq 0 ]] && extra=(--verify)
		line=$("${pre[@]}" "$@" "${extra[@]}" 2>"$out/$key.$mode.err" | grep "^$prog: mode=")
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
				R[$key.$mode.$k]=$v
			fi
		done
	done
	R[$key.$mode.status]=$status
	R[$key.$mode.time_s]=${best:-nan}
	if [[ $status == failed ]]; then
		echo "  $key $mode: failed: $(tail -n 1 "$out/$key.$mode.err")"
	fi
	if [[ $mode == gaia* && -f $out/$key.$mode.stats ]]; then
		local st
		for st in merged_pages h2d_bytes pinned_regions host_regions; do
			R[$key.$mode.${st/#h2d_bytes/gaia_h2d_bytes}]=$(awk -v k="$st" '$1 == "gaia:" && $2 == k { print $3 }' "$out/$key.$mode.stats")
		done
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
# the same database on a device with a quarter of its size (copy mode
# cannot run there)
mem4x=$((db_mib / 4))
echo "collage, device memory $mem4x MiB (the database is 4x that)"
collage4x_modes=(managed gaia gaia-H)
label=collage4x
for m in "${collage4x_modes[@]}"; do
	SIMGPU_MEM_MB=$mem4x run_mode collage "$m" "$collage" run --db "$out/data/db" --input "$out/data/input.png" --mode "${m%%-*}"
done
label=
echo "stitch"
stitch_modes=(cpu managed gaia)
for m in "${stitch_modes[@]}"; do
	args=(run --tiles "$out/data/tiles" --out "$out/data/canvas_$m.pgm" --mode "$m")
	[[ $m == cpu ]] && args+=(--png "$out/stitch_canvas.png")
	run_mode stitch "$m" "$stitch" "${args[@]}"
done

# ---- tables and CSV
db_bytes=$(val collage.cpu.db_bytes)
# collage_table LABEL TITLE CSV MODES...
collage_table() {
	local l=$1 title=$2 csv=$3 m
	shift 3
	echo
	echo "$title"
	printf "%-8s %-7s %9s %10s %11s %12s %11s %10s %10s %10s %9s\n" mode status time_s read_MiB to_gpu_MiB gaia_h2d_MiB host_read_MiB touched_MiB h2d_MiB uvm_faults identical
	echo "mode,status,time_s,file_read_bytes,db_to_gpu_bytes,gaia_h2d_bytes,host_read_bytes,touched_bytes,h2d_bytes,uvm_faults,uvm_migrated_bytes,identical" >"$csv"
	for m in "$@"; do
		printf "%-8s %-7s %9s %10s %11s %12s %11s %10s %10s %10s %9s\n" "$m" "$(val $l.$m.status)" "$(val $l.$m.time_s)" \
			"$(mib $l.$m.file_read_bytes)" "$(mib $l.$m.db_to_gpu_bytes)" "$(mib $l.$m.gaia_h2d_bytes)" "$(mib $l.$m.host_read_bytes)" \
			"$(mib $l.$m.touched_bytes)" "$(mib $l.$m.h2d_bytes)" "$(val $l.$m.uvm_faults)" "$(val $l.$m.identical)"
		echo "$m,$(val $l.$m.status),$(val $l.$m.time_s),$(val $l.$m.file_read_bytes),$(val $l.$m.db_to_gpu_bytes),$(val $l.$m.gaia_h2d_bytes),$(val $l.$m.host_read_bytes),$(val $l.$m.touched_bytes),$(val $l.$m.h2d_bytes),$(val $l.$m.uvm_faults),$(val $l.$m.uvm_migrated_bytes),$(val $l.$m.identical)" >>"$csv"
	done
}
collage_table collage "collage: $images tiny images ($(mib collage.cpu.db_bytes) MiB database), 1024x768 input = 768 tiles, $SIMGPU_MEM_MB MiB device" \
	"$out/collage.csv" "${collage_modes[@]}"
collage_table collage4x "collage, the same database on a $mem4x MiB device (4x its memory); gaia: $(val collage4x.gaia.pinned_regions) regions read in place (registered); gaia-H (a device with HMM): $(val collage4x.gaia-H.host_regions) through HMM" \
	"$out/collage4x.csv" "${collage4x_modes[@]}"
echo "  read: bytes the program read from the files itself; to_gpu: bytes the simulated GPU"
echo "  received over the bus (H2D copies + UVM migrations + kernels' loads from host memory, less"
echo "  the program's own input copy; a byte the shim copies into managed memory and then migrates"
echo "  counts twice); gaia_h2d: the bytes the shim uploaded (its GAIA_STATS h2d_bytes); host_read:"
echo "  kernels' loads from host memory (regions read in place); touched: distinct 4 KiB records"
echo "  the kernels read"

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
     "" skip 1 using (strcol(2) eq "ok" ? \$5/1048576 : 1/0) title "over the bus to the GPU", \
     "" skip 1 using (strcol(2) eq "ok" ? \$8/1048576 : 1/0) title "records the kernels read"
set output "$out/collage4x.png"
set title "collage, database 4x device memory: MiB over the bus, and seconds x 100"
set ylabel ""
plot "$out/collage4x.csv" skip 1 using (strcol(2) eq "ok" ? \$5/1048576 : 1/0):xtic(1) title "MiB over the bus to the GPU", \
     "" skip 1 using (strcol(2) eq "ok" ? \$8/1048576 : 1/0) title "MiB of records the kernels read", \
     "" skip 1 using (strcol(2) eq "ok" ? \$3*100 : 1/0) title "time (s x 100)"
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
for m in "${collage4x_modes[@]}"; do
	[[ $(val collage4x.$m.status) == ok ]] || ok_all=0
done
[[ $(val collage4x.gaia.status) == ok ]] || echo "note: collage gaia mode on the small device failed (see $out/collage4x.gaia.err)"
# bus bytes into the device (all of them: copies, migrations, kernels'
# loads from host memory) over the database's size, and over the bytes
# the kernels touched
frac() {
	local l=$1 den=$2 read
	read=$(val $l.gaia.db_to_gpu_bytes)
	if [[ $(val $l.gaia.status) == ok && $read =~ ^[0-9]+$ && $den =~ ^[0-9]+$ ]]; then
		awk -v a="$read" -v b="$den" 'BEGIN { printf "%.4f", a / b }'
	else echo failed; fi
}
echo "BENCH collage_db_fraction_read $(frac collage4x "$db_bytes") fraction (database 4x device memory)"
echo "BENCH collage_bus_over_touched $(frac collage4x "$(val collage4x.gaia.touched_bytes)") ratio (database 4x device memory)"
echo "BENCH collage_speedup_vs_managed $(ratio "$(val collage4x.managed.time_s)" "$(val collage4x.gaia.time_s)") x (database 4x device memory)"
echo "BENCH collage_hmm_speedup_vs_managed $(ratio "$(val collage4x.managed.time_s)" "$(val collage4x.gaia-H.time_s)") x (database 4x device memory, regions read through HMM)"
echo "BENCH collage_fit_db_fraction_read $(frac collage "$db_bytes") fraction (database fits)"
echo "BENCH collage_fit_speedup_vs_managed $(ratio "$(val collage.managed.time_s)" "$(val collage.gaia.time_s)") x (database fits)"
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
echo "files: $out/{collage,collage4x,stitch}.csv, $out/{collage_time,collage_bytes,collage4x,stitch_time}.png,"
echo "       $out/collage.png (the collage), $out/collage_input.png, $out/stitch_canvas.png"
