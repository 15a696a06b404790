#!/usr/bin/env bash
# Python's own mmap test suite (python3 -m test test_mmap) under the shim,
# every file mapping managed (GAIA_MIN_MAP_KB=4). Passes when the suite
# passes and the shim managed mappings during it (GAIA_LOG=info lines):
# a pass with nothing managed would prove nothing.
#   python_test_mmap.sh PRELOAD WORKDIR
# Exit 77 (skip) when no python3 with the test package is found.
set -u
preload=$1 work=$2
rm -rf "$work" && mkdir -p "$work"

python=""
for candidate in "$(command -v python3 2>/dev/null)" /usr/bin/python3 /usr/local/bin/python3; do
  [ -n "$candidate" ] && [ -x "$candidate" ] || continue
  # The interpreter itself, not a wrapper script (pyenv's shims are bash).
  exe=$("$candidate" -c 'import sys; print(sys.executable)' 2>/dev/null) || continue
  if "$exe" -c 'import test.test_mmap' 2>/dev/null; then python=$exe; break; fi
done
if [ -z "$python" ]; then
  v=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo 3)
  echo "python_test_mmap: SKIP: no python3 with its test suite (Debian: apt-get install libpython$v-testsuite)"
  exit 77
fi
echo "python_test_mmap: $python ($("$python" -V 2>&1))"

# Leak reports would be the interpreter's own, not the shim's.
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
cd "$work"
TMPDIR=$work GAIA_MIN_MAP_KB=4 GAIA_LOG=info LD_PRELOAD=$preload \
  "$python" -m test test_mmap -v >"$work/out" 2>"$work/err"
rc=$?
tail -5 "$work/out"
managed=$(grep -c ': info: managing ' "$work/err")
problems=$(grep -E 'gaia\[[0-9]+\]: (error|warning)' "$work/err" | head -5)
echo "python_test_mmap: exit $rc, $(grep -cE '\.\.\. ok$' "$work/out") tests ok, $managed mappings managed by the shim"
if [ $rc -ne 0 ] || ! grep -q "Result: SUCCESS" "$work/out"; then
  echo "python_test_mmap: FAIL: the suite failed under the shim"; grep -E 'FAIL|ERROR' "$work/out" | head -20
  tail -20 "$work/err"; exit 1
fi
if [ "$managed" -lt 10 ]; then
  echo "python_test_mmap: FAIL: only $managed mappings were managed"; tail -20 "$work/err"; exit 1
fi
if [ -n "$problems" ]; then
  echo "python_test_mmap: FAIL: the shim complained:"; echo "$problems"; exit 1
fi
rm -rf "$work"
echo "python_test_mmap: ok"
