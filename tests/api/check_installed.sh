#!/bin/bash
# `cmake --install` of a build into a temporary prefix, then what a user gets:
# the binary runs, only the public headers are there, and the API example builds
# against the installed tree through find_package(optstate), linked to the
# shared and to the static library, each giving check_example.sh's outputs.
# Usage: tests/api/check_installed.sh BUILD_DIR   (from the repository root)
set -euo pipefail
build=$1
tmp=$(mktemp -d /tmp/optstate-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fail() { echo "FAIL $*"; exit 1; }
cmake --install "$build" --prefix "$prefix" > "$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install"; }
version=$("$prefix/bin/optstate" --version) || fail "installed optstate --version"
[[ $version == "optstate 0.2.0"* ]] || fail "installed optstate --version says: $version"
echo "ok   $prefix/bin/optstate: $version"
installed=$(cd "$prefix/include/optstate" && find . -type f | sort)
public=$(cd lib/include/optstate && find . -type f -not -path "./libtorch/*" | sort)
[ "$installed" = "$public" ] || fail "installed headers differ from lib/include/optstate: $(diff <(echo "$public") <(echo "$installed"))"
echo "ok   $(echo "$installed" | wc -l) public headers installed, nothing else"
# A man page per subcommand, each naming its flags; completion from the installed --help.
commands=$("$prefix/bin/optstate" --help | sed -n '/^Subcommands:/,$p' | sed -nE 's/^  ([a-z][a-z-]*) .*/\1/p')
man=$(find "$prefix" -path "*/man1/optstate.1")
[ -n "$man" ] || fail "no man page optstate.1 under $prefix"
for c in $commands; do
  page=$(dirname "$man")/optstate-$c.1
  [ -f "$page" ] || fail "no man page for $c"
  grep -q -- '-json' "$page" || fail "$page does not show --json"
done
echo "ok   optstate.1 and a man page for each of $(echo $commands | wc -w) subcommands"
completion=$prefix/share/bash-completion/completions/optstate
got=$(bash -c 'source "$1"; COMP_WORDS=("$2" vali); COMP_CWORD=1; _optstate; echo "${COMPREPLY[*]}";
               COMP_WORDS=("$2" validate --ju); COMP_CWORD=2; _optstate; echo "${COMPREPLY[*]}"' \
      sh "$completion" "$prefix/bin/optstate")
[ "$got" = $'validate\n--junit' ] || fail "bash completion gave: $got"
echo "ok   bash completion: 'vali' → validate, 'validate --ju' → --junit"
for link in shared static; do
  cmake -S tests/api/consumer -B "$tmp/$link" -DCMAKE_PREFIX_PATH="$prefix" -DOPTSTATE_LINK=$link \
    -DCMAKE_BUILD_TYPE=Release > "$tmp/$link.log" 2>&1 &&
    cmake --build "$tmp/$link" >> "$tmp/$link.log" 2>&1 || { cat "$tmp/$link.log"; fail "building against the $link library"; }
  program=$tmp/$link/optimizer_summary
  # Not grep -q: it stops reading at the first match, and ldd's SIGPIPE then fails the
  # pipeline under pipefail (seen on a fresh machine).
  libs=$(ldd "$program")
  if [ $link = shared ]; then
    grep -q "$prefix/.*liboptstate\.so" <<< "$libs" || fail "the shared build does not load liboptstate.so from $prefix"
  else
    ! grep -q liboptstate <<< "$libs" || fail "the static build loads a liboptstate"
  fi
  bash tests/api/check_example.sh "$program" || fail "the example linked to the $link library"
done
