#!/bin/bash
# quiet.sh BUILD PRELOAD — what a program expects: a library preloaded at
# its default log level prints nothing on the program's stderr when all is
# well. Runs, under PRELOAD with GAIA_LOG and GAIA_STATS unset:
#   - the demo (build/demo/gaia_demo, as `make demo` runs it, on a 4 MiB file);
#   - the workloads in their gaia mode, as their tests run them: sssp on an
#     R-MAT graph, the producer/consumer pair (workloads/gunrock), collage
#     and stitch (workloads/mosaic); their inputs are made without the shim;
#   - each program of tests/programs (vmm backing, which all of them take),
#     but larger_than_device, which skips itself on a device larger than its
#     file, and capture_copy, which warns by design.
# Each must exit 0 with an empty stderr; whatever was there is printed.
# Exit 0 pass, 1 fail, 77 when nothing could be run.
set -u
build=$1
preload=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gaia-quiet.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
unset GAIA_LOG GAIA_STATS LD_PRELOAD
export LD_LIBRARY_PATH=$build/simgpu
export SIMGPU_WORKERS=${SIMGPU_WORKERS:-2} SIMGPU_MEM_MB=${SIMGPU_MEM_MB:-256} GAIA_MIN_MAP_KB=4
shim=(env "LD_PRELOAD=$preload")
runs=0
fails=0

# check NAME CMD...: CMD (which preloads the shim itself) must exit 0 with
# nothing on stderr, within 120 s.
check() {
	local name=$1 rc
	shift
	runs=$((runs + 1))
	timeout 120 "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	if [ $rc -ne 0 ]; then
		echo "FAIL $name: exited $rc: $*"
		sed 's/^/  stdout| /' "$tmp/out" | tail -20
		sed 's/^/  stderr| /' "$tmp/err" | tail -20
		fails=$((fails + 1))
	elif [ -s "$tmp/err" ]; then
		echo "FAIL $name: printed on stderr under the shim (GAIA_LOG and GAIA_STATS unset):"
		sed 's/^/  stderr| /' "$tmp/err" | head -40
		fails=$((fails + 1))
	else
		echo "ok $name"
	fi
}

# setup CMD...: making inputs, without the shim; a failure stops the script.
setup() {
	"$@" >"$tmp/setup.out" 2>&1 || { echo "FAIL: setting up: $*"; cat "$tmp/setup.out"; exit 1; }
}

demo=$build/demo/gaia_demo
if [ -x "$demo" ]; then
	check demo "${shim[@]}" "$demo" "$tmp/demo.dat" 4
fi

gunrock=$build/workloads/gunrock
if [ -x "$gunrock/sssp" ] && [ -x "$gunrock/producer" ] && [ -x "$gunrock/gunrock-graph" ]; then
	setup "$gunrock/gunrock-graph" rmat --scale=9 --edge-factor=8 -o "$tmp/g"
	check "gunrock sssp --mode=gaia" "${shim[@]}" "$gunrock/sssp" --mode=gaia --validate --iterations=2 "$tmp/g.csr"
	setup "$gunrock/gunrock-graph" rmat --scale=10 --edge-factor=8 --seed=3 -o "$tmp/p"
	check "gunrock producer + sssp --mode=gaia, both under the shim" \
		env "CONSUMER_PRELOAD=$preload" "PRODUCER_PRELOAD=$preload" PAIR_TIMEOUT=100 \
		bash "$(dirname "$0")/../../workloads/gunrock/run_pair.sh" "$gunrock" "$tmp/p.csr" \
		"--mode=gaia --validate" "--pattern=random --percent=20 --per-page=32 --iterations=3 --seed=9"
fi

mosaic=$build/workloads/mosaic
if [ -x "$mosaic/collage" ] && [ -x "$mosaic/stitch" ]; then
	setup "$mosaic/collage" gendb "$tmp/db" --images 3000 --seed 7
	setup "$mosaic/collage" genimage "$tmp/in.png" --width 256 --height 192 --seed 3
	check "mosaic collage --mode gaia" "${shim[@]}" "$mosaic/collage" run --db "$tmp/db" --input "$tmp/in.png" \
		--mode gaia --out "$tmp/collage.png" --verify
	setup "$mosaic/stitch" gen "$tmp/tiles" --rows 3 --cols 4 --tile-w 300 --tile-h 160 --overlap 24 --seed 5
	check "mosaic stitch --mode gaia" "${shim[@]}" "$mosaic/stitch" run --tiles "$tmp/tiles" \
		--out "$tmp/canvas.pgm" --mode gaia --radius 2 --verify
fi

for prog in "$build"/tests/programs/*; do
	[ -f "$prog" ] && [ -x "$prog" ] || continue
	args=()
	case "$(basename "$prog")" in
	larger_than_device | capture_copy) continue ;; # a skip; a warning by design
	lib*.so | lib*.so.*) continue ;;       # plugins and their libraries: a program loads them
	local_cudart) args=("$build/tests/programs/liblocal_cudart_lib.so") ;;
	esac
	check "tests/programs/$(basename "$prog")" env GAIA_BACKING=vmm "${shim[@]}" "$prog" "${args[@]}"
done

if [ $runs -eq 0 ]; then
	echo "SKIP: none of the demo, workloads or test programs is built under $build"
	exit 77
fi
if [ $fails -ne 0 ]; then
	echo "FAIL: $fails of $runs programs were not quiet (or failed) under the shim"
	exit 1
fi
echo "ok quiet: $runs programs, nothing on stderr"
