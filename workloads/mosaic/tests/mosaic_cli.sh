#!/usr/bin/env bash
# mosaic_cli.sh BINDIR CASE — one end-to-end check of the collage and
# stitch programs on small generated inputs; exit 0 pass, 1 fail.
#
# Cases:  collage_<mode>, stitch_<mode>    the mode's output is identical to
#                                          the CPU reference (--verify)
#         collage_modes_agree              every working mode writes the same PNG
#         collage_truncated_db, collage_mismatched_db, collage_wrong_image_size,
#         collage_bad_image, stitch_truncated_tiles, stitch_bad_grid,
#         stitch_bad_mode                  bad input: a clear error, exit 1
# The gaia cases run the program under test (only it, not this script's
# helpers) with LD_PRELOAD=$MOSAIC_TEST_PRELOAD, the shim; the programs
# themselves know nothing of it.
set -u
bindir=$1
case_name=$2
collage=$bindir/collage
stitch=$bindir/stitch
work=$(mktemp -d "${TMPDIR:-/tmp}/mosaic-test.XXXXXX")
trap 'rm -rf "$work"' EXIT

fail() { echo "FAIL ($case_name): $*" >&2; exit 1; }

# run_ok CMD...: must exit 0 and print identical=1
run_ok() {
	local out rc
	out=$("$@" 2>"$work/err")
	rc=$?
	if [[ $rc -ne 0 ]]; then
		cat "$work/err" >&2
		fail "'$*' exited $rc"
	fi
	echo "$out"
	[[ $out == *" identical=1"* ]] || fail "output not identical to the reference: $out"
}

# run_err PATTERN CMD...: must exit 1 with PATTERN on stderr
run_err() {
	local pat=$1 rc
	shift
	"$@" >"$work/out" 2>"$work/err"
	rc=$?
	cat "$work/err"
	[[ $rc -eq 1 ]] || fail "'$*' exited $rc, expected 1"
	grep -q -- "$pat" "$work/err" || fail "stderr lacks '$pat'"
}

small_db() {
	"$collage" gendb "$work/db" --images 3000 --seed 7 || fail "gendb"
	"$collage" genimage "$work/in.png" --width 256 --height 192 --seed 3 || fail "genimage"
}

small_tiles() {
	"$stitch" gen "$work/tiles" --rows 3 --cols 4 --tile-w 300 --tile-h 160 --overlap 24 --seed 5 || fail "stitch gen"
}

shim=()
if [[ $case_name == *_gaia ]]; then
	[[ -n ${MOSAIC_TEST_PRELOAD:-} ]] || fail "MOSAIC_TEST_PRELOAD (the shim to preload) is not set"
	shim=(env "LD_PRELOAD=$MOSAIC_TEST_PRELOAD" "GAIA_STATS=$work/stats")
fi

case $case_name in
collage_cpu | collage_copy | collage_managed | collage_gaia)
	small_db
	run_ok "${shim[@]}" "$collage" run --db "$work/db" --input "$work/in.png" --mode "${case_name#collage_}" --verify
	;;
collage_modes_agree)
	small_db
	for m in cpu copy managed; do
		run_ok "$collage" run --db "$work/db" --input "$work/in.png" --mode $m --out "$work/$m.png" --verify
	done
	cmp "$work/cpu.png" "$work/copy.png" && cmp "$work/cpu.png" "$work/managed.png" || fail "PNG files differ"
	;;
collage_truncated_db)
	small_db
	truncate -s -100 "$work/db.hist"
	run_err "db.hist: truncated" "$collage" run --db "$work/db" --input "$work/in.png" --mode copy
	;;
collage_mismatched_db)
	small_db
	"$collage" gendb "$work/other" --images 2000 --seed 7 || fail "gendb"
	cp "$work/other.tiles" "$work/db.tiles"
	run_err "db.tiles describes 2000" "$collage" run --db "$work/db" --input "$work/in.png" --mode managed
	;;
collage_wrong_image_size)
	small_db
	"$collage" genimage "$work/odd.png" --width 250 --height 192 || fail "genimage"
	run_err "wrong image size 250x192" "$collage" run --db "$work/db" --input "$work/odd.png" --mode copy
	;;
collage_bad_image)
	small_db
	head -c 5000 "$work/db.tiles" >"$work/junk.png"
	run_err "neither a PNG nor" "$collage" run --db "$work/db" --input "$work/junk.png" --mode cpu
	head -c 3000 "$work/in.png" >"$work/cut.png"
	run_err "cut.png" "$collage" run --db "$work/db" --input "$work/cut.png" --mode cpu
	;;
stitch_cpu | stitch_managed)
	small_tiles
	run_ok "$stitch" run --tiles "$work/tiles" --out "$work/canvas.pgm" --mode "${case_name#stitch_}" --radius 2 --verify
	;;
stitch_gaia)
	# both sides wrote the shared pages: the shim must have merged some
	small_tiles
	run_ok "${shim[@]}" "$stitch" run --tiles "$work/tiles" --out "$work/canvas.pgm" --mode gaia --radius 2 --verify
	merged=$(awk '$1 == "gaia:" && $2 == "merged_pages" { print $3 }' "$work/stats" 2>/dev/null)
	[[ ${merged:-0} -gt 0 ]] || fail "no merged pages in GAIA_STATS (got '${merged:-none}')"
	echo "merged_pages $merged"
	;;
stitch_uneven_split)
	small_tiles
	for g in 1 3 4; do
		run_ok "$stitch" run --tiles "$work/tiles" --out "$work/canvas.pgm" --mode managed --gpu-cols $g --threads 3 --verify
	done
	;;
stitch_truncated_tiles)
	small_tiles
	truncate -s -1 "$work/tiles"
	run_err "tiles: truncated" "$stitch" run --tiles "$work/tiles" --out "$work/canvas.pgm" --mode cpu
	;;
stitch_bad_grid)
	run_err "overlap 100 must be less than half" "$stitch" gen "$work/tiles" --tile-w 150 --tile-h 150 --overlap 100
	;;
stitch_bad_mode)
	small_tiles
	"$stitch" run --tiles "$work/tiles" --out "$work/canvas.pgm" --mode copy >/dev/null 2>"$work/err"
	[[ $? -eq 2 ]] && grep -q "is not one of gaia, managed, cpu" "$work/err" || fail "bad mode accepted"
	;;
*)
	fail "unknown case"
	;;
esac
echo "PASS ($case_name)"
