# Sourced by the tests/install scripts: $1 is the test's work directory
# (emptied first); the GAIA_* variables come from tests/install/CMakeLists.txt.
set -u

prog=$(basename "$0" .sh)
work=$1
build=$GAIA_BUILD_DIR
manifest=$build/install_manifest.txt

fail() {
	echo "$prog: FAIL: $*" >&2
	exit 1
}

# Runs a command, failing the test with its output when it fails.
run_or_fail() {
	local out
	out=$("$@" 2>&1) || fail "$* exited $?:
$out"
}

# The knob names of include/gaia_env.h, one a line, in table order: the
# first column of gaia-envdoc's table.
envdoc_names() {
	"$1" | sed -n 's/^| `\(GAIA_[A-Z0-9_]*\)` |.*/\1/p'
}

# Compares two lists of names (files, one name a line): fails naming what
# is in one and not the other, or what either lists twice.
same_names() {
	local what=$1 want=$2 got=$3 diff
	diff=$(diff <(sort "$want") <(sort "$got")) ||
		fail "$what: names differ from gaia-envdoc's (< gaia-envdoc only, > $what only):
$diff"
	[ -s "$want" ] || fail "$what: gaia-envdoc listed no knob"
}

# Installs this build with cmake --install into DESTDIR=$1, prefix $2,
# keeping the build's install_manifest.txt for `make uninstall` as it was.
# Sets `installed` to the tree ($1$2).
install_tree() {
	local dest=$1 prefix=$2
	if [ -e "$manifest" ] && [ ! -e "$work/manifest.saved" ]; then
		cp -p "$manifest" "$work/manifest.saved"
	fi
	trap restore_manifest EXIT
	DESTDIR=$dest "$GAIA_CMAKE" --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 ||
		fail "cmake --install $build --prefix $prefix (DESTDIR=$dest) failed:
$(cat "$work/install.log")"
	installed=$dest$prefix
}

restore_manifest() {
	if [ -e "$work/manifest.saved" ]; then
		cp -p "$work/manifest.saved" "$manifest"
	else
		rm -f "$manifest"
	fi
}

rm -rf "$work"
mkdir -p "$work" || fail "cannot make $work"
# Without symbolic links, as gaiarun names paths.
work=$(cd "$work" && pwd -P)
