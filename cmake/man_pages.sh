#!/bin/bash
# Writes the man pages optstate(1) and optstate-<command>(1), one per subcommand
# that `optstate --help` lists, from the binary's own --help with help2man, so
# that they cannot drift from the command line.
# Usage: cmake/man_pages.sh OPTSTATE_BINARY VERSION OUTDIR
set -euo pipefail
binary=$1 version=$2 out=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
rm -f "$out"/optstate*.1
# The one-line NAME of a page: the help's description without its asides,
# up to its first ':', ';' or sentence end.
summary() {
  sed -n '/^Usage:/q; p' | tr '\n' ' ' | sed -E 's/ *\([^()]*\)//g; s/[:;].*//; s/\. .*//; s/ +/ /g; s/ $//; s/^(.)/\L\1/'
}
commands=$("$binary" --help | sed -n '/^Subcommands:/,$p' | sed -nE 's/^  ([a-z][a-z-]*) .*/\1/p')
[ -n "$commands" ] || { echo "man_pages.sh: no subcommands in $binary --help" >&2; exit 1; }
{
  echo "[SEE ALSO]"
  for c in $commands; do printf '.BR optstate-%s (1)\n' "$c"; done | sed '$!s/$/,/'
} > "$work/top.h2m"
printf '[SEE ALSO]\n.BR optstate (1)\n' > "$work/sub.h2m"
help2man -N --no-discard-stderr --version-string="$version" --section=1 --include="$work/top.h2m" \
  -n "$("$binary" --help | sed 's/^optstate: //' | summary)" -o "$out/optstate.1" "$binary"
for c in $commands; do
  # help2man runs PROGRAM --help; a wrapper named optstate-<command> gives it the subcommand's.
  printf '#!/bin/sh\nexec "%s" %s "$@"\n' "$binary" "$c" > "$work/optstate-$c"
  chmod +x "$work/optstate-$c"
  help2man -N --no-discard-stderr --version-string="$version" --section=1 --include="$work/sub.h2m" \
    -n "$("$binary" "$c" --help | summary)" -o "$out/optstate-$c.1" "$work/optstate-$c"
done
