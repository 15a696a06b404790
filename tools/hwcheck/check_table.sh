#!/bin/sh
# check_table.sh HWCHECK MARKDOWN — runs gaia-hwcheck and checks its
# table: exit status 0, a row for every check it lists (--list), and no
# verdict but the known ones.
set -u
prog=$1 md=$2
rm -f "$md"
"$prog" --markdown "$md"
rc=$?
[ "$rc" -eq 0 ] || { echo "check_table: gaia-hwcheck exited with $rc" >&2; exit 1; }
[ -s "$md" ] || { echo "check_table: no Markdown table in $md" >&2; exit 1; }
fail=0
for id in $("$prog" --list | awk '{ print $1 }'); do
	grep -qF "| $id |" "$md" || { echo "check_table: no row for $id" >&2; fail=1; }
done
# the verdict is the last cell of each row of the table
bad=$(grep '^| ' "$md" | tail -n +2 | sed -e 's/ |$//' -e 's/.*| //' |
	grep -vxE 'ok|differs|simulated|needs a GPU|needs nvcc tools|skipped')
[ -z "$bad" ] || { echo "check_table: unknown verdicts: $bad" >&2; fail=1; }
[ $fail -eq 0 ] && echo "check_table: every check has a row"
exit $fail
