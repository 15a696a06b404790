# cmake --install into a staging DESTDIR puts every file where the README
# says, with the soname links right; pkg-config finds gaia there and a
# program including <gaia.h> builds with its flags and runs against the
# library; the man pages are there and well formed; `make uninstall`
# removes exactly what was installed.
. "$(dirname "$0")/common.sh"

major=${GAIA_VERSION%%.*}
lib=$GAIA_LIBDIR bin=$GAIA_BINDIR inc=$GAIA_INCLUDEDIR man=$GAIA_MANDIR
prefix=/opt/gaia-test
dest=$work/stage
tree=$dest$prefix

# Something of someone else's in a directory the install shares.
mkdir -p "$tree/$man/man1"
echo "not ours" >"$tree/$man/man1/other.1"

install_tree "$dest" "$prefix"

# --- what is where
# (the manifest names them without DESTDIR)
cat >"$work/expected" <<LIST
$prefix/$bin/gaia-envdoc
$prefix/$bin/gaiarun
$prefix/$inc/gaia.h
$prefix/$lib/libgaia-simgpu.so
$prefix/$lib/libgaia.so
$prefix/$lib/libgaia.so.$GAIA_VERSION
$prefix/$lib/libgaia.so.$major
$prefix/$lib/pkgconfig/gaia.pc
$prefix/$man/man1/gaiarun.1
$prefix/$man/man7/libgaia.7
LIST
LC_ALL=C sort -o "$work/expected" "$work/expected"
LC_ALL=C sort "$manifest" >"$work/manifest.sorted"
diff -u "$work/expected" "$work/manifest.sorted" >"$work/manifest.diff" ||
	fail "install_manifest.txt is not the expected list (- expected, + installed):
$(cat "$work/manifest.diff")"
while read -r f; do
	[ -e "$dest$f" ] || fail "$dest$f not installed"
done <"$work/expected"
for f in "$tree/$bin/gaiarun" "$tree/$bin/gaia-envdoc"; do
	[ -x "$f" ] && [ -f "$f" ] || fail "$f is not an executable file"
done
cmp -s "$GAIA_SOURCE_DIR/include/gaia.h" "$tree/$inc/gaia.h" || fail "$tree/$inc/gaia.h differs from include/gaia.h"

# --- the library: one file, the soname and the dev link pointing at it
real=$tree/$lib/libgaia.so.$GAIA_VERSION
[ -f "$real" ] && [ ! -L "$real" ] || fail "$real is not a regular file"
[ "$(readlink "$tree/$lib/libgaia.so.$major")" = "libgaia.so.$GAIA_VERSION" ] ||
	fail "libgaia.so.$major -> '$(readlink "$tree/$lib/libgaia.so.$major")', expected libgaia.so.$GAIA_VERSION"
[ "$(readlink "$tree/$lib/libgaia.so")" = "libgaia.so.$major" ] ||
	fail "libgaia.so -> '$(readlink "$tree/$lib/libgaia.so")', expected libgaia.so.$major"
soname=$(readelf -d "$real" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libgaia.so.$major" ] && [ "$soname" = "$GAIA_SONAME" ] ||
	fail "SONAME of $real is '$soname', expected libgaia.so.$major"
readelf --dyn-syms -W "$real" | grep -qw gaia_mversion || fail "$real does not export gaia_mversion"

# --- pkg-config: the installed prefix; DESTDIR comes back as the sysroot
command -v pkg-config >/dev/null || fail "pkg-config not found (apt-get install pkg-config)"
# (its words, spaced by one space: pkg-config and pkgconf space them apart
# differently)
pc() {
	local out
	out=$(PKG_CONFIG_PATH=$tree/$lib/pkgconfig PKG_CONFIG_LIBDIR= pkg-config "$@") || return
	echo "$out" | tr -s ' \n' ' ' | sed 's/^ //; s/ $//'
}
[ "$(pc --variable=prefix gaia)" = "$prefix" ] ||
	fail "gaia.pc's prefix is '$(pc --variable=prefix gaia)', expected $prefix:
$(cat "$tree/$lib/pkgconfig/gaia.pc")"
[ "$(pc --modversion gaia)" = "$GAIA_VERSION" ] || fail "pkg-config --modversion gaia: '$(pc --modversion gaia)'"
flags=$(pc --cflags --libs gaia) || fail "pkg-config --cflags --libs gaia failed"
[ "$flags" = "-I$prefix/$inc -L$prefix/$lib -lgaia" ] ||
	fail "pkg-config --cflags --libs gaia: '$flags', expected '-I$prefix/$inc -L$prefix/$lib -lgaia'"
flags=$(PKG_CONFIG_SYSROOT_DIR=$dest pc --cflags --libs gaia) ||
	fail "PKG_CONFIG_SYSROOT_DIR=$dest pkg-config --cflags --libs gaia failed"
[ "$flags" = "-I$tree/$inc -L$tree/$lib -lgaia" ] ||
	fail "with PKG_CONFIG_SYSROOT_DIR: '$flags', expected '-I$tree/$inc -L$tree/$lib -lgaia'"

# --- a program built with those flags: its gaia_mversion is the library's
# (ENOENT for a page that is not a managed mapping, where a stub would
# not know the errno)
cat >"$work/use_gaia.c" <<'C'
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS; gaia.h itself is plain C11 */
#include <gaia.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

int main(void)
{
	uint32_t version = 7;
	void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int rc;

	if (page == MAP_FAILED)
		return 2;
	rc = gaia_mversion(page, 4096, &version);
	if (rc != -1 || errno != ENOENT || version != 0) {
		printf("gaia_mversion: %d (%s), version %u\n", rc, strerror(errno), version);
		return 1;
	}
	printf("gaia_mversion of an unmanaged page: ENOENT\n");
	return 0;
}
C
# shellcheck disable=SC2086 # $flags is a list of words
"$GAIA_CC" -std=c11 -Wall -Wextra -Werror -o "$work/use_gaia" "$work/use_gaia.c" $flags \
	>"$work/cc.log" 2>&1 || fail "$GAIA_CC <gaia.h> program with '$flags' failed:
$(cat "$work/cc.log")"
readelf -d "$work/use_gaia" | grep -q "(NEEDED).*\[libgaia.so.$major\]" ||
	fail "the program does not need libgaia.so.$major:
$(readelf -d "$work/use_gaia" | grep NEEDED)"
if [ -n "$GAIA_SANITIZE" ]; then
	echo "$prog: not running the program: the library is built with -fsanitize=$GAIA_SANITIZE"
else
	out=$(LD_LIBRARY_PATH=$tree/$lib "$work/use_gaia" 2>&1) || fail "use_gaia exited $?: $out"
fi

# --- the man pages: present, with every knob (help_knobs checks which),
# and well formed for groff when it is here
grep -q '^\.B GAIA_READAHEAD_KB$' "$tree/$man/man7/libgaia.7" || fail "libgaia.7 has no knob list"
grep -q '^\.TH GAIARUN 1 .*gaia '"$GAIA_VERSION" "$tree/$man/man1/gaiarun.1" || fail "gaiarun.1 has no .TH with the version"
if ! grep -q '@[A-Z_]*@' "$tree/$man/man1/gaiarun.1" "$tree/$man/man7/libgaia.7"; then :; else
	fail "a template placeholder is left in the man pages: $(grep -h '@[A-Z_]*@' "$tree/$man"/man*/*)"
fi
if command -v groff >/dev/null; then
	for page in "$tree/$man/man1/gaiarun.1" "$tree/$man/man7/libgaia.7"; do
		warnings=$(LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$page" 2>&1)
		[ -z "$warnings" ] || fail "groff warns about $page:
$warnings"
	done
else
	echo "$prog: groff not found: man pages not typeset"
fi

# --- make uninstall removes exactly those files
make -s -C "$GAIA_SOURCE_DIR" BUILD="$build" DESTDIR="$dest" uninstall >"$work/uninstall.log" 2>&1 ||
	fail "make uninstall failed:
$(cat "$work/uninstall.log")"
while read -r f; do
	[ -e "$dest$f" ] || [ -L "$dest$f" ] && fail "$dest$f still there after make uninstall"
done <"$work/expected"
[ "$(cat "$tree/$man/man1/other.1" 2>/dev/null)" = "not ours" ] ||
	fail "make uninstall removed $tree/$man/man1/other.1, which it did not install"
left=$(find "$dest" ! -type d | sort)
[ "$left" = "$tree/$man/man1/other.1" ] || fail "left after make uninstall: $left"

echo "$prog: $(wc -l <"$work/expected") files installed and uninstalled; pkg-config: $flags"
