# gaiarun runs PROGRAM ARGS without "--" (the first word that is not an
# option starts the command, and its options stay its own), and still with
# it; the build tree's gaiarun preloads the build's library; an installed
# gaiarun, and a copy of the installed tree moved elsewhere, preload the
# library of their own tree (<bindir>/../lib/libgaia.so.0).
. "$(dirname "$0")/common.sh"

# Prints what a program under gaiarun gets: LD_PRELOAD, the GAIA_* knobs
# gaiarun sets here, and its arguments.
cat >"$work/show" <<'SH'
#!/bin/sh
echo "LD_PRELOAD=$LD_PRELOAD"
echo "GAIA_LOG=${GAIA_LOG-unset} GAIA_STATS=${GAIA_STATS-unset}"
for arg; do echo "arg=$arg"; done
SH
chmod +x "$work/show"

# expect_run LIB GAIARUN ARGS...: runs GAIARUN ARGS in an environment
# without LD_PRELOAD or GAIA_* (from $work, so ./show is the program) and
# checks that show ran with LIB preloaded, GAIA_LOG=error and the arguments
# "--stats", "a b" (given after ./show). Under a sanitizer the library
# cannot be preloaded into /bin/sh: then --dry-run shows what would run.
expect_run() {
	local lib=$1 gaiarun=$2 out want
	shift 2
	if [ -n "$GAIA_SANITIZE" ]; then
		out=$(cd "$work" && env -i PATH="$PATH" "$gaiarun" --dry-run "$@" 2>&1) ||
			fail "$gaiarun --dry-run $* exited $?: $out"
		want="GAIA_LOG=error
LD_PRELOAD=$lib
./show --stats 'a b'"
	else
		out=$(cd "$work" && env -i PATH="$PATH" "$gaiarun" "$@" 2>&1) ||
			fail "$gaiarun $* exited $?: $out"
		want="LD_PRELOAD=$lib
GAIA_LOG=error GAIA_STATS=unset
arg=--stats
arg=a b"
	fi
	[ "$out" = "$want" ] || fail "$gaiarun $*:
printed:
$out
expected:
$want"
}

build_real=$(cd "$build" && pwd -P)
gaiarun=$build/tools/gaiarun
expect_run "$build_real/libgaia.so" "$gaiarun" --log=error ./show --stats "a b"
expect_run "$build_real/libgaia.so" "$gaiarun" --log=error -- ./show --stats "a b"
# "--lib X" takes the next word; the word after that is the program
expect_run "$build_real/libgaia.so" "$gaiarun" --lib "$build/libgaia.so" --log=error ./show --stats "a b"

# Installed (with DESTDIR, as a package is staged), run from there.
install_tree "$work/stage" /usr/local
expect_run "$installed/$GAIA_LIBDIR/$GAIA_SONAME" "$installed/$GAIA_BINDIR/gaiarun" --log=error ./show --stats "a b"
restore_manifest

# The same tree moved: nothing in it names where it was installed.
mv "$installed" "$work/moved"
expect_run "$work/moved/$GAIA_LIBDIR/$GAIA_SONAME" "$work/moved/$GAIA_BINDIR/gaiarun" --log=error ./show --stats "a b"

echo "$prog: gaiarun ./show ARGS ran under the build's, the installed and the moved library"
rm -rf "$work/stage" "$work/moved"
