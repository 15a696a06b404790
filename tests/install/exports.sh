# libgaia.so exports every ABI name of the CUDA hook table
# (shim/cuda_hooks.h): a row whose name the version script (shim/libgaia.map)
# leaves out is never reached by a program linked with -lcuda, which then
# calls the driver without the shim.
. "$(dirname "$0")/common.sh"

lib="$build/libgaia.so.$GAIA_VERSION"
[ -f "$lib" ] || fail "$lib not built"
rows=$(sed -n 's/^[[:space:]]*X([A-Za-z0-9_]*,[[:space:]]*[0-9]*,[[:space:]]*[01],[[:space:]]*\([A-Za-z0-9_]*\),.*/\1/p' \
	"$GAIA_SOURCE_DIR/shim/cuda_hooks.h" | sort -u)
count=$(printf '%s\n' "$rows" | grep -c .)
[ "$count" -ge 100 ] || fail "only $count rows read from shim/cuda_hooks.h"
exported=$(nm -D --defined-only "$lib" | awk '{print $NF}' | sort -u)
missing=$(printf '%s\n' "$rows" | comm -23 - <(printf '%s\n' "$exported"))
[ -z "$missing" ] || fail "hook table rows libgaia.so does not export (add them to shim/libgaia.map):
$missing"
# The simulated GPU's forms of the shim's kernels (their block loops and
# host identities) live in libgaia-simgpu.so, not in the production
# library.
readelf -S "$lib" | grep -q '\.symtab' || fail "$lib has no symbol table (stripped): cannot check it"
sim=$(nm "$lib" | awk '{print $NF}' | grep -E '_blocks$|^gaia_(diff_pages|gather_changes|rebase_pages)_host$|simgpu_register_kernels' || true)
[ -z "$sim" ] || fail "libgaia.so carries the simulator's kernels:
$sim"
[ -f "$build/libgaia-simgpu.so" ] || fail "$build/libgaia-simgpu.so not built"
echo "$prog: all $count ABI names of the hook table exported; no simulator kernel inside"
