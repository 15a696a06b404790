#!/usr/bin/env bash
# git under the shim: a generated repository (text and binary files over
# several commits) is cloned through the pack protocol, repacked (-a -d -f)
# and fsck'ed, once without and once with the shim, every file mapping
# managed; pack files and the index are read through mmap. The objects,
# refs, fsck verdict and checked-out trees must be identical, and the shim
# must have managed mappings during the run.
#   git_repo.sh PRELOAD WORKDIR
set -u
preload=$1 work=$2
command -v git >/dev/null || { echo "git_repo: SKIP: no git (apt-get install git)"; exit 77; }
rm -rf "$work" && mkdir -p "$work"
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
export GIT_CONFIG_NOSYSTEM=1 HOME=$work GIT_AUTHOR_NAME=gaia GIT_AUTHOR_EMAIL=gaia@example.org \
  GIT_COMMITTER_NAME=gaia GIT_COMMITTER_EMAIL=gaia@example.org \
  GIT_AUTHOR_DATE='2026-01-01T00:00:00Z' GIT_COMMITTER_DATE='2026-01-01T00:00:00Z'

# The source repository: 6 commits of 300 text files and 20 binary blobs,
# a third of them changed each time (deterministic: awk's fixed srand).
src=$work/src
git init -q -b main "$src"
for c in 1 2 3 4 5 6; do
  awk -v c=$c -v dir="$src" 'BEGIN { srand(c);
    for (f = 0; f < 300; f++) {
      if (c > 1 && (f + c) % 3) continue;
      path = sprintf("%s/d%02d/file%03d.txt", dir, f % 17, f);
      system("mkdir -p " dir sprintf("/d%02d", f % 17));
      printf "" > path;
      for (l = 0; l < 40 + f % 60; l++) printf "%d %d %s line %d %08x\n", c, f, "gaia", l, int(rand() * 2^31) >> path;
      close(path) } }'
  for b in $(seq 0 19); do
    [ $c -gt 1 ] && [ $(( (b + c) % 4 )) -ne 0 ] && continue
    head -c $(( 30000 + b * 3000 )) /dev/zero | tr '\0' "\\$(printf %03o $(( (b * 7 + c) % 256 )))" > "$src/blob$b.bin"
  done
  git -C "$src" add -A && git -C "$src" commit -q -m "commit $c"
done

# run NAME [LD_PRELOAD]: clone, repack, fsck, describe everything.
run() {
  local name=$1 pre=${2:-} dir=$work/$1 log=$work/$1.err
  mkdir -p "$dir"
  (
    if [ -n "$pre" ]; then export LD_PRELOAD=$pre GAIA_MIN_MAP_KB=4 GAIA_LOG=info; fi
    git clone -q --no-local "file://$src" "$dir/clone" &&
    git -C "$dir/clone" repack -q -a -d -f --window=20 &&
    { git -C "$dir/clone" fsck --full --strict 2>>"$log"; echo "fsck exit $?"; } &&
    git -C "$dir/clone" count-objects -v | grep -E '^(count|in-pack|packs)' &&
    git -C "$dir/clone" rev-list --all --objects | sort &&
    git -C "$dir/clone" cat-file --batch-all-objects --batch-check | sort &&
    git -C "$dir/clone" log --format='%H %T %s' &&
    git -C "$dir/clone" verify-pack -v "$dir"/clone/.git/objects/pack/*.idx | grep -c ' blob ' &&
    (cd "$dir/clone" && git ls-files -s && find . -path ./.git -prune -o -type f -print0 | sort -z | xargs -0 sha1sum)
  ) >"$work/$name.out" 2>"$log"
}
run plain || { echo "git_repo: FAIL: without the shim:"; tail -20 "$work/plain.err"; exit 1; }
run shim "$preload" || { echo "git_repo: FAIL: under the shim:"; tail -20 "$work/shim.err"; exit 1; }
managed=$(grep -c ': info: managing ' "$work/shim.err")
problems=$(grep -E 'gaia\[[0-9]+\]: (error|warning)' "$work/shim.err" | head -5)
echo "git_repo: $(grep -c . "$work/plain.out") lines of description, $managed mappings managed by the shim"
if ! cmp -s "$work/plain.out" "$work/shim.out"; then
  echo "git_repo: FAIL: the results differ with the shim:"; diff "$work/plain.out" "$work/shim.out" | head -20; exit 1
fi
grep -q '^fsck exit 0$' "$work/shim.out" || { echo "git_repo: FAIL: fsck failed"; tail "$work/shim.err"; exit 1; }
[ "$managed" -ge 5 ] || { echo "git_repo: FAIL: only $managed mappings were managed"; tail "$work/shim.err"; exit 1; }
[ -z "$problems" ] || { echo "git_repo: FAIL: the shim complained:"; echo "$problems"; exit 1; }
rm -rf "$work"
echo "git_repo: ok (identical with and without the shim)"
