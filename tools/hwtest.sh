#!/usr/bin/env bash
# hwtest.sh — every CUDA program of the tree run the way a user runs it, as
# one table: the demo, tests/programs, tests/gpu/protocol's cases under the
# shim with each backing (auto, managed, vmm), and the workloads without the
# shim (copy, managed, cpu) and in gaia mode under it.
#
#   tools/hwtest.sh [--build DIR] [--gpu | --simulated] [--quick]
#                   [--markdown FILE] [--logs DIR] [--timeout SECONDS]
#                   [--only REGEX] [--preload LIST]
#
# --gpu runs the nvcc builds (make hwtest builds them: build/hwtest/,
# build/demo/gaia_demo_cuda, the workloads' nvcc builds) on the real GPU;
# --simulated runs the g++ builds on the simulated GPU (build/simgpu). The
# default is --gpu when `nvidia-smi -L` finds a GPU. Each run has TIMEOUT
# seconds (60). The programs check themselves (exit 0 pass, 1 fail, 77
# skip); the workloads print status=ok and identical=1 (collage, stitch) or
# validated=1 (sssp). --quick: one backing per program, fewer protocol cases,
# smaller inputs. --only: the runs whose "program mode" matches REGEX.
# --preload: what LD_PRELOAD gets for runs under the shim (default
# DIR/libgaia.so; sanitizer builds put their runtime first). Full output of
# each run: --logs (default DIR/hwtest/logs-gpu or -simulated). The table
# goes to stdout and, as Markdown, to FILE (default DIR/hwtest.md). Exit 1
# if a run failed or timed out, after the whole table; 2 for bad arguments.
set -u
build=build
target=
quick=0
markdown=
logs=
timeout_s=60
only=
preload=
while [[ $# -gt 0 ]]; do
	case $1 in
	--build) build=$2; shift 2 ;;
	--build=*) build=${1#*=}; shift ;;
	--gpu) target=gpu; shift ;;
	--simulated) target=simulated; shift ;;
	--quick) quick=1; shift ;;
	--markdown) markdown=$2; shift 2 ;;
	--markdown=*) markdown=${1#*=}; shift ;;
	--logs) logs=$2; shift 2 ;;
	--logs=*) logs=${1#*=}; shift ;;
	--timeout) timeout_s=$2; shift 2 ;;
	--timeout=*) timeout_s=${1#*=}; shift ;;
	--only) only=$2; shift 2 ;;
	--only=*) only=${1#*=}; shift ;;
	--preload) preload=$2; shift 2 ;;
	--preload=*) preload=${1#*=}; shift ;;
	-h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
	*) echo "hwtest: unknown argument $1 (--help lists them)" >&2; exit 2 ;;
	esac
done
[[ $timeout_s =~ ^[1-9][0-9]*$ ]] || { echo "hwtest: --timeout takes a positive number of seconds" >&2; exit 2; }
build=$(cd "$build" 2>/dev/null && pwd) || { echo "hwtest: no build directory (run make first)" >&2; exit 2; }
if [[ -z $target ]]; then
	if nvidia-smi -L >/dev/null 2>&1; then target=gpu; else target=simulated; fi
fi
markdown=${markdown:-$build/hwtest.md}
preload=${preload:-$build/libgaia.so}
logs=${logs:-$build/hwtest/logs-$target}
mkdir -p "$logs" || exit 2
rm -f "$logs"/*.log
work=$(mktemp -d "${TMPDIR:-/tmp}/gaia-hwtest.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/tmp"

source=$(cd "$(dirname "$0")/.." && pwd)
graphtool=$build/workloads/gunrock/gunrock-graph
if [[ $target == gpu ]]; then
	demo=$build/demo/gaia_demo_cuda
	programs=$build/hwtest
	protocol=$build/hwtest/protocol
	collage=$build/workloads/mosaic/nvcc/collage
	stitch=$build/workloads/mosaic/nvcc/stitch
	sssp=$build/workloads/gunrock/sssp-cuda
	base_env=()
	devices=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
	where="$(nvidia-smi -L 2>/dev/null | head -n 1)"
else
	demo=$build/demo/gaia_demo
	programs=$build/tests/programs
	protocol=$build/tests/gpu/protocol
	collage=$build/workloads/mosaic/collage
	stitch=$build/workloads/mosaic/stitch
	sssp=$build/workloads/gunrock/sssp
	base_env=("LD_LIBRARY_PATH=$build/simgpu" SIMGPU_WORKERS=2 SIMGPU_MEM_MB=256)
	devices=2 # SIMGPU_DEVICES=2 where a case needs two
	where="simulated GPU ($build/simgpu)"
fi
shim_env=("LD_PRELOAD=$preload" GAIA_MIN_MAP_KB=4)

# ---- one run

names=() modes=() results=() secs=() lasts=()
failed=0
row() { # PROGRAM MODE RESULT SECONDS LAST
	names+=("$1") modes+=("$2") results+=("$3") secs+=("$4") lasts+=("$5")
	printf '%-38s %-14s %-8s %8s  %s\n' "$1" "$2" "$3" "$4" "$5"
	[[ $3 == FAIL || $3 == timeout ]] && failed=1
	return 0
}

# run PROGRAM MODE CHECK [VAR=VALUE...] -- COMMAND...
# CHECK: exit (0 pass, 77 skip), mosaic (and status=ok identical=1), sssp
# (and validated=1).
run() {
	local prog=$1 mode=$2 check=$3 vars=() cmd log t0 t1 rc result last
	shift 3
	while [[ $# -gt 0 && $1 != -- ]]; do vars+=("$1"); shift; done
	shift
	[[ -n $only && ! "$prog $mode" =~ $only ]] && return 0
	log=$logs/$(tr -c 'A-Za-z0-9_.-' _ <<<"${prog}_$mode" | sed 's/_*$//').log
	if [[ ! -x $1 ]]; then
		row "$prog" "$mode" FAIL 0 "missing: $1 (make hwtest builds it)"
		return 0
	fi
	t0=$(date +%s.%N)
	(cd "$work" && TMPDIR=$work/tmp timeout -k 5 "$timeout_s" env "${base_env[@]}" "${vars[@]}" "$@") >"$log" 2>&1 </dev/null
	rc=$?
	t1=$(date +%s.%N)
	last=$(grep -v -e '^gaia: ' -e '^[[:space:]]*$' "$log" | tail -n 1 | cut -c1-110)
	case $rc in
	0) result=pass ;;
	77) result=skip; last="exit 77${last:+: $last}" ;;
	124 | 137) result=timeout; last="no end after ${timeout_s} s; $last" ;;
	*) result=FAIL; last="exit $rc: $last" ;;
	esac
	if [[ $result == pass && $check == mosaic ]] && ! grep -q 'status=ok.*identical=1' "$log"; then
		result=FAIL last="no status=ok identical=1: $last"
	elif [[ $result == pass && $check == sssp ]] && ! grep -q '^RESULT .*validated=1' "$log"; then
		result=FAIL last="no validated RESULT: $last"
	fi
	row "$prog" "$mode" "$result" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')" "$last"
}

echo "hwtest: $target: $where; $(date -u '+%Y-%m-%d %H:%M UTC'); $(uname -sr)"
echo
printf '%-38s %-14s %-8s %8s  %s\n' program mode result seconds "last line"
printf '%-38s %-14s %-8s %8s  %s\n' -------------------------------------- -------------- -------- -------- ---------

backings=(auto managed vmm)
[[ $quick == 1 ]] && backings=(auto)

# ---- the demo and tests/programs, under the shim
for b in "${backings[@]}"; do
	run gaia_demo "shim $b" exit "${shim_env[@]}" "GAIA_BACKING=$b" -- "$demo" "$work/demo.dat" 4
done
# Every tests/programs/*.cu. ptr_array, ptr_in_file, map_before_init and odd_sizes rely on
# vmm's same-address replica (tests/programs/CMakeLists.txt): not run with
# managed. larger_than_device needs a device smaller than its file (a 32 MiB
# simulated one; on a real GPU it skips itself).
# A NAME_lib.cu is a plugin (libNAME_lib.so): program NAME (NAME.c) loads it
# with dlopen(RTLD_LOCAL).
for src in "$source"/tests/programs/*.cu; do
	p=$(basename "$src" .cu)
	args=()
	case $p in
	*_lib) args=("$programs/lib$p.so") p=${p%_lib} ;;
	esac
	for b in "${backings[@]}"; do
		case $p:$b in ptr_array:managed | ptr_in_file:managed | odd_sizes:managed | map_before_init:managed) continue ;; esac
		extra=()
		[[ $p == larger_than_device ]] && extra=(SIMGPU_MEM_MB=32)
		run "$p" "shim $b" exit "${shim_env[@]}" "GAIA_BACKING=$b" "${extra[@]}" -- "$programs/$p" "${args[@]}"
	done
done
# spin_streams' modes: the CPU writes while a kernel spins, then a launch on
# another stream (GAIA_RUNNING_KERNELS, README "A launch while earlier kernels run").
for mode in shared isolated; do
	for b in "${backings[@]}"; do
		run "spin_streams $mode" "shim $b" exit "${shim_env[@]}" "GAIA_BACKING=$b" \
			"GAIA_RUNNING_KERNELS=$mode" -- "$programs/spin_streams" "$mode"
	done
done

# full_device: the sync was a snapshot release (GAIA_STATS), and with the
# kernel on every thread slot for 6.5 s, the note after 5 s.
for b in "${backings[@]}"; do
	run "full_device snapshot" "shim $b" exit "${shim_env[@]}" "GAIA_BACKING=$b" -- \
		/bin/sh "$source/tests/programs/full_device_snapshot.sh" "$programs/full_device"
	run "full_device note" "shim $b" exit "${shim_env[@]}" "GAIA_BACKING=$b" -- "$programs/full_device" note
done

# io_during_launch's other ways into a mapping while its region gets a
# device copy: raw syscall(), sockets, the _FORTIFY_SOURCE forms, stdio.
for mode in syscall socket chk socket_chk stdio; do
	for b in "${backings[@]}"; do
		run "io_during_launch $mode" "shim $b" exit "${shim_env[@]}" "GAIA_BACKING=$b" -- \
			"$programs/io_during_launch" "$mode"
	done
done

# ---- tests/gpu/protocol, the cases CTest runs (tests/gpu/CMakeLists.txt)
cases=(launch_sees_cpu sync_publishes false_sharing same_byte cpu_store_invisible private bytes_moved
	launch_after_launch peer_read peer_read_outside_writer touch_during_first_launch mprotect_writable truncated_while_mapped
	map_fixed_over_replica explicit_device_calls two_devices_01 two_devices_10 late_fault_after_move)
[[ $quick == 1 ]] && cases=(launch_sees_cpu sync_publishes false_sharing same_byte map_fixed_over_replica two_devices_10)
for c in "${cases[@]}"; do
	for b in "${backings[@]}"; do
		[[ $c == late_fault_after_move && $b != vmm ]] && continue # only vmm moves a region aside
		extra=()
		if [[ $c == two_devices_* ]]; then
			if [[ $devices -lt 2 ]]; then
				[[ -z $only || "protocol $c shim $b" =~ $only ]] &&
					row "protocol $c" "shim $b" skip 0 "needs two GPUs, found $devices"
				continue
			fi
			extra=(SIMGPU_DEVICES=2)
		fi
		run "protocol $c" "shim $b" exit "${shim_env[@]}" "GAIA_BACKING=$b" "${extra[@]}" -- "$protocol" "$c"
	done
done

# Regions read in place (a read-only registration of the page cache):
# GAIA_BACKING=pinned, and auto where the file is larger than half the
# device's free memory (the cases map 256 MiB: on the simulator a 64 MiB
# device; on a GPU auto gives such a file a replica).
for c in in_place_sparse in_place_no_look in_place_then_writable in_place_remapped in_place_truncated in_place_mremap_over \
	kernel_writes_in_place in_place_made_unreadable; do
	for b in pinned auto; do
		[[ $quick == 1 && $b == auto ]] && continue
		# a GPU's free memory holds the file: auto gives it a replica,
		# which drops a kernel's store instead of faulting, and whose
		# first look reads the file whole
		[[ ($c == kernel_writes_in_place || $c == in_place_no_look) && $b == auto && $target == gpu ]] && continue
		run "protocol $c" "shim $b" exit "${shim_env[@]}" "GAIA_BACKING=$b" SIMGPU_MEM_MB=64 -- "$protocol" "$c"
	done
done

# Replicas paged on demand (managed memory, base copies on the host): a
# writable 256 MiB file written at 512 places, under paged everywhere (on
# the simulator a 64 MiB device, where auto pages it too); and uploads in
# chunks of GAIA_GPU_READAHEAD_KB (the transfer count is checked only
# where the simulator counts it).
for b in paged auto; do
	[[ $quick == 1 && $b == auto ]] && continue
	[[ $b == auto && $target == gpu ]] && continue # a GPU holds the file: a replica
	run "protocol paged_sparse" "shim $b" exit "${shim_env[@]}" "GAIA_BACKING=$b" SIMGPU_MEM_MB=64 -- "$protocol" paged_sparse
done
# What kernels faulted on in a region paged on demand, learned through
# CUPTI's fault records and prefetched before the next launch (fault and
# transfer counts checked only where the simulator counts them; on a GPU,
# the bytes, and whether libcupti was found: GAIA_LOG=info says).
run "protocol paged_learns" "shim paged" exit "${shim_env[@]}" GAIA_BACKING=paged GAIA_LOG=info GAIA_GPU_FAULTS=learn SIMGPU_MEM_MB=64 -- "$protocol" paged_learns
# ... and while a kernel runs, ahead of its fault front (the sums checked
# everywhere; the fault count where the simulator counts; on a GPU,
# GAIA_STATS' front_windows says whether fault records came during the
# kernel at all).
run "protocol paged_front" "shim paged" exit "${shim_env[@]}" GAIA_BACKING=paged GAIA_STATS=1 SIMGPU_MEM_MB=256 -- "$protocol" paged_front
# A paged launch on a device the program filled but for 4 MiB: fault
# records (CUPTI, whose start-up takes device memory) wait for room, and
# the kernels' bytes reach the file (GAIA_LOG=info says when CUPTI starts).
run "protocol paged_full_device" "shim paged" exit "${shim_env[@]}" GAIA_BACKING=paged GAIA_LOG=info SIMGPU_MEM_MB=64 -- "$protocol" paged_full_device
run "protocol paged_full_device thread" "shim paged" exit "${shim_env[@]}" GAIA_BACKING=paged GAIA_LOG=info SIMGPU_MEM_MB=64 \
	PROTOCOL_THREAD=1 -- "$protocol" paged_full_device
# A cudaMalloc of the device's free memory and 8 MiB more, a replica to
# give up for it.
run "protocol demote_under_malloc" "shim auto" exit "${shim_env[@]}" GAIA_BACKING=auto SIMGPU_MEM_MB=64 -- "$protocol" demote_under_malloc
# ... and the replica back whole at the first sync after the cudaFree.
run "protocol promote_after_free" "shim auto" exit "${shim_env[@]}" GAIA_BACKING=auto SIMGPU_MEM_MB=64 -- "$protocol" promote_after_free
# ... and a read-only one kernels read in one 64 KiB unit of eight stays
# paged then (the bus bytes are checked only where the simulator counts
# them; GAIA_LOG=info says what was chosen).
run "protocol promote_touched" "shim auto" exit "${shim_env[@]}" GAIA_BACKING=auto GAIA_LOG=info SIMGPU_MEM_MB=128 PROTOCOL_MB=48 \
	PROTOCOL_TOUCH=sparse -- "$protocol" promote_touched
# The same through cudaMallocPitch, the stream-ordered cudaMallocAsync and
# a 3-D CUDA array.
for a in cudaMallocPitch cudaMallocAsync cudaMalloc3DArray; do
	[[ $quick == 1 ]] && continue
	run "protocol demote_under_malloc $a" "shim auto" exit "${shim_env[@]}" GAIA_BACKING=auto SIMGPU_MEM_MB=64 \
		"PROTOCOL_ALLOC=$a" -- "$protocol" demote_under_malloc
done
# Copies between a CUDA array and a mapped file, both ways, in stream
# order after a kernel's writes (2-D, 3-D, a batch).
run "protocol array_copies" "shim vmm" exit "${shim_env[@]}" GAIA_BACKING=vmm -- "$protocol" array_copies
# Random sequences against the model of the promise, in each mode the
# device allows (read in place: a read-only mapping kernels only read).
for b in vmm managed paged; do
	[[ $quick == 1 && $b != vmm ]] && continue
	run "protocol model" "shim $b" exit "${shim_env[@]}" "GAIA_BACKING=$b" -- "$protocol" model
done
run "protocol model_ro" "shim pinned" exit "${shim_env[@]}" GAIA_BACKING=pinned SIMGPU_MEM_MB=64 -- "$protocol" model_ro
for kb in 64 4096; do
	[[ $quick == 1 && $kb == 4096 ]] && continue
	run "protocol upload_chunks $kb KiB" "shim auto" exit "${shim_env[@]}" "GAIA_GPU_READAHEAD_KB=$kb" -- "$protocol" upload_chunks
done

# ---- the workloads: inputs as bench_mosaic.sh and the gunrock tests make them
images=32768 rows=4 cols=8 scale=14
[[ $quick == 1 ]] && images=2048 rows=1 cols=4 scale=10
data=$work/data
mkdir -p "$data"
prepared=1
if ! { "$collage" gendb "$data/db" --images "$images" --seed 1 &&
	"$collage" genimage "$data/input.png" --width 1024 --height 768 --seed 1 &&
	"$stitch" gen "$data/tiles" --rows "$rows" --cols "$cols" --seed 1 &&
	"$graphtool" rmat --scale="$scale" --edge-factor=8 -o "$data/g"; } >"$logs/inputs.log" 2>&1; then
	prepared=0
	row inputs "-" FAIL 0 "making the workloads' inputs: $(tail -n 1 "$logs/inputs.log")"
fi
if [[ $prepared == 1 ]]; then
	# the simulated device holds the database twice (copy mode, a replica)
	db_mib=$((images * 8192 / 1048576))
	mem=(SIMGPU_MEM_MB=$((2 * db_mib + 256)))
	[[ $quick == 1 ]] && workload_backings=(auto) || workload_backings=(auto managed vmm)
	for m in copy managed; do
		run collage "$m" mosaic "${mem[@]}" -- "$collage" run --db "$data/db" --input "$data/input.png" --mode "$m" --verify
	done
	for b in "${workload_backings[@]}"; do
		run collage "gaia $b" mosaic "${mem[@]}" "${shim_env[@]}" "GAIA_BACKING=$b" -- \
			"$collage" run --db "$data/db" --input "$data/input.png" --mode gaia --verify
	done
	for m in cpu managed; do
		run stitch "$m" mosaic "${mem[@]}" -- "$stitch" run --tiles "$data/tiles" --out "$data/canvas_$m.pgm" --mode "$m" --verify
	done
	for b in "${workload_backings[@]}"; do
		run stitch "gaia $b" mosaic "${mem[@]}" "${shim_env[@]}" "GAIA_BACKING=$b" -- \
			"$stitch" run --tiles "$data/tiles" --out "$data/canvas_gaia_$b.pgm" --mode gaia --verify
	done
	for m in copy managed; do
		run sssp "$m" sssp -- "$sssp" --mode="$m" --validate --iterations=2 "$data/g.csr"
	done
	for b in "${workload_backings[@]}"; do
		run sssp "gaia $b" sssp "${shim_env[@]}" "GAIA_BACKING=$b" -- \
			"$sssp" --mode=gaia --validate --iterations=2 "$data/g.csr"
	done
fi

# ---- Markdown
{
	echo "# hwtest ($target)"
	echo
	echo "$where; $(date -u '+%Y-%m-%d %H:%M UTC'); $(uname -sr); tools/hwtest.sh$([[ $quick == 1 ]] && echo ' --quick')."
	echo
	echo "| program | mode | result | seconds | last line |"
	echo "|---|---|---|---|---|"
	for i in "${!names[@]}"; do
		printf '| %s | %s | %s | %s | %s |\n' "${names[$i]}" "${modes[$i]}" "${results[$i]}" "${secs[$i]}" \
			"$(sed 's/|/\\|/g' <<<"${lasts[$i]}")"
	done
} >"$markdown" || { echo "hwtest: cannot write $markdown" >&2; exit 2; }

n_pass=0 n_skip=0 n_fail=0
for r in "${results[@]}"; do
	case $r in pass) n_pass=$((n_pass + 1)) ;; skip) n_skip=$((n_skip + 1)) ;; *) n_fail=$((n_fail + 1)) ;; esac
done
echo
echo "hwtest: $n_pass passed, $n_skip skipped, $n_fail failed of ${#results[@]} runs; table in $markdown, logs in $logs"
exit $failed
