#!/bin/bash
# ctest oracle_corpus: the enumerated corpus made afresh by real torch 1.13 and 2.6
# (testdata/gen/enumerated.sh into the build tree), then every oracle of
# check_corpus.py over the fresh corpus and over the committed one
# (testdata/enumerated), so a torch that writes differently from the commit is
# caught as surely as an optstate that reads differently; then what optstate
# writes of every healthy file (repack, remap) loaded and resumed by both torches.
# Usage: check_corpus.sh OPTSTATE READ_ORACLE BUILD_DIR [all|committed]
# "committed" (the sanitized build): the committed corpus only, no outputs oracle.
# Without torch 2.6 (no chroot, not root) the committed corpus alone is checked
# and the test says so, exiting 77 (skipped) -- except under CI=true, where that fails.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
optstate=$1 oracle=$2 build=$(cd "$3" && pwd) scope=${4:-all}
known=tests/oracle/known_divergences.json
fresh="$build/enumerated-fresh"
case "$fresh" in "$repo"/*) ;; *) echo "check_corpus: the build tree must be inside the repository" >&2; exit 2 ;; esac
dirs=(testdata/enumerated/torch113 testdata/enumerated/torch26 testdata/enumerated/distributed_torch26)
fresh_ok=0
root=${OPTSTATE_TORCH26_ROOT:-/var/cache/optstate-torch26}
if [ "$scope" = all ] &&
   { [ -x "$root/usr/bin/python3" ] || [ -n "${OPTSTATE_TORCH26_PYTHON:-}" ] || [ "$(id -u)" = 0 ]; }; then
  [ -x "$root/usr/bin/python3" ] || [ -n "${OPTSTATE_TORCH26_PYTHON:-}" ] || testdata/gen/torch26-chroot.sh >&2
  # FSDP1's rank files (2 gloo processes per layout) are checked as committed only.
  if OPTSTATE_ENUM_NO_FSDP1=1 testdata/gen/enumerated.sh "${fresh#"$repo"/}" > "$build/enumerated-fresh.log" 2>&1; then
    fresh_ok=1
    dirs+=("$fresh/torch113" "$fresh/torch26")
    echo "fresh corpus: $(grep -h 'cases,' "$build/enumerated-fresh.log" | tr '\n' ' ')"
  else
    cat "$build/enumerated-fresh.log" >&2
    echo "check_corpus: generating the corpus with real torch failed" >&2
    exit 1
  fi
fi
outputs=()
if [ $fresh_ok = 1 ]; then  # the outputs oracle needs torch 2.6 (and 1.13) to load and resume what optstate wrote
  rm -rf "$build/oracle-outputs"
  mkdir -p "$build/oracle-outputs"
  outputs=(--outputs "$build/oracle-outputs" --torch113 /usr/bin/python3 --torch26 testdata/gen/torch26-python.sh)
fi
/usr/bin/python3 tests/oracle/check_corpus.py --optstate "$optstate" --read-oracle "$oracle" --known "$known" \
  "${outputs[@]}" "${dirs[@]}"
rc=$?
[ $rc = 0 ] || exit $rc
if [ $fresh_ok = 0 ] && [ "$scope" = all ]; then
  echo "TORCH 2.6 NOT AVAILABLE: only the committed corpus was checked" >&2
  [ "${CI:-}" = "true" ] && exit 1
  exit 77
fi
exit 0
