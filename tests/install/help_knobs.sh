# gaiarun --help has one option for each knob of include/gaia_env.h, and
# for nothing else: the "sets GAIA_X" of its lines are exactly the names
# gaia-envdoc lists. So are the man pages' lists: the variables of
# libgaia(7) and the options of gaiarun(1).
. "$(dirname "$0")/common.sh"

envdoc_names "$build/tools/gaia-envdoc" >"$work/envdoc" || fail "gaia-envdoc failed"

"$build/tools/gaiarun" --help >"$work/help" 2>&1 || fail "gaiarun --help exited $?"
# "sets GAIA_X:" opens each knob option's text; the name may not be cut by
# wrapping, so join the lines first.
tr '\n' ' ' <"$work/help" | grep -o 'sets GAIA_[A-Z0-9_]*:' | sed 's/^sets //; s/:$//' >"$work/help.names"
same_names "gaiarun --help" "$work/envdoc" "$work/help.names"

# Each of those options is accepted and sets its own variable: given the
# knob's default (in KiB for a SIZE), --dry-run shows NAME=default.
echo "not loaded" >"$work/dummy.so"
sed -n 's/^| `\(GAIA_[A-Z0-9_]*\)` | [a-z]* | `\{0,1\}\([^`|]*\)`\{0,1\} |.*/\1 \2/p' \
	<("$build/tools/gaia-envdoc") >"$work/defaults"
grep -E '^  --[a-z0-9-]+' "$work/help" | while read -r usage rest; do
	case $rest in sets\ GAIA_*) ;; *) continue ;; esac
	name=${rest#sets }
	name=${name%%:*}
	default=$(sed -n "s/^$name //p" "$work/defaults")
	[ "$default" = "(empty)" ] && default=
	opt=${usage%%[[=]*}
	case $usage in
	*=SIZE) arg="$opt=${default}K" ;;
	*\[=*\] | *=*) arg="$opt=$default" ;;
	*) arg=$opt default=1 ;; # a flag
	esac
	out=$("$build/tools/gaiarun" --lib="$work/dummy.so" "$arg" --dry-run true 2>&1) ||
		fail "gaiarun $arg --dry-run true exited $?: $out"
	want="$name=$default"
	[ -n "$default" ] || want="$name=''" # shell-quoted
	echo "$out" | grep -qxF -- "$want" ||
		fail "gaiarun $arg --dry-run true did not print $want:
$out"
done || exit 1

for page in libgaia.7 gaiarun.1; do
	[ -f "$build/man/$page" ] || fail "$build/man/$page not built"
done
# the tags (.TP, then .B NAME) of the ENVIRONMENT section
awk '/^\.SH / { env = $2 == "ENVIRONMENT" } env && tag && /^\.B GAIA_/ { print $2 } { tag = /^\.TP$/ }' \
	"$build/man/libgaia.7" >"$work/man7.names"
same_names "libgaia(7) ENVIRONMENT" "$work/envdoc" "$work/man7.names"
tr '\n' ' ' <"$build/man/gaiarun.1" | grep -o 'sets GAIA_[A-Z0-9_]*:' | sed 's/^sets //; s/:$//' >"$work/man1.names"
same_names "gaiarun(1) OPTIONS" "$work/envdoc" "$work/man1.names"

echo "$prog: $(wc -l <"$work/envdoc") knobs in gaiarun --help, libgaia(7) and gaiarun(1)"
