# gaiarun --version prints project(VERSION) of CMakeLists.txt, and nothing
# else; the library's file name and soname carry the same version.
. "$(dirname "$0")/common.sh"

out=$("$build/tools/gaiarun" --version 2>&1) || fail "gaiarun --version exited $?: $out"
[ "$out" = "gaiarun $GAIA_VERSION" ] ||
	fail "gaiarun --version printed '$out', expected 'gaiarun $GAIA_VERSION'"

[ -f "$build/libgaia.so.$GAIA_VERSION" ] && [ ! -L "$build/libgaia.so.$GAIA_VERSION" ] ||
	fail "$build/libgaia.so.$GAIA_VERSION is not the library file"
soname=$(readelf -d "$build/libgaia.so.$GAIA_VERSION" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libgaia.so.${GAIA_VERSION%%.*}" ] ||
	fail "SONAME of libgaia.so.$GAIA_VERSION is '$soname', expected libgaia.so.${GAIA_VERSION%%.*}"
echo "$prog: gaiarun $GAIA_VERSION, soname $soname"
