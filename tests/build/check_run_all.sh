#!/bin/bash
# tests/run-all.sh is what CI runs; its own exit code is the verdict. This runs
# it in a scratch tree where cmake, ctest and the dependency scripts are stubs,
# and checks the code it ends with, that no Asan build outlives it and (as
# root) that both trixie chroots are made, the first before the Release suites:
#   every suite passes        -> 0 and "finished"
#   Release ctest fails (8)   -> 8 at once, the (sleeping) Asan build killed
#   the Asan build fails      -> 1, the build log's tail shown
#   Asan ctest fails (5)      -> 5
# Usage: tests/build/check_run_all.sh (from the repository)
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/tree/tests" "$scratch/tree/.ci" "$scratch/tree/testdata/gen" "$scratch/bin"
cp "$repo/tests/run-all.sh" "$scratch/tree/tests/"
printf '#!/bin/bash\nexit 0\n' > "$scratch/tree/.ci/install-deps"
# torch26-chroot.sh: takes STUB_CHROOT_SECONDS, then marks its chroot made
# (chroot.done, chroot--python-build.done).
cat > "$scratch/tree/testdata/gen/torch26-chroot.sh" <<'STUB'
#!/bin/bash
sleep "${STUB_CHROOT_SECONDS:-0}"
touch "$STUB_DIR/chroot$1.done"
STUB
chmod +x "$scratch/tree/testdata/gen/torch26-chroot.sh"
# cmake: configure makes the build directory; the Asan build records its pid,
# sleeps STUB_ASAN_BUILD_SECONDS and exits STUB_ASAN_BUILD_RC.
cat > "$scratch/bin/cmake" <<'STUB'
#!/bin/bash
if [ "$1" = -S ]; then mkdir -p "$4"; exit 0; fi
if [ "$2" = build/asan ]; then
  echo $$ > "$STUB_DIR/asan_build.pid"
  sleep "${STUB_ASAN_BUILD_SECONDS:-0}"
  echo "stub compiler error"; exit "${STUB_ASAN_BUILD_RC:-0}"
fi
exit 0
STUB
# ctest: exits STUB_RELEASE_RC in build/release, STUB_ASAN_RC in build/asan.
cat > "$scratch/bin/ctest" <<'STUB'
#!/bin/bash
echo "stub ctest in ${PWD##*/}"
case "$PWD" in
  */build/release)
    if [ "$(id -u)" = 0 ] && [ ! -e "$STUB_DIR/chroot.done" ]; then
      echo "the Release suites began before the torch 2.6 chroot was made"; exit 98
    fi
    exit "${STUB_RELEASE_RC:-0}" ;;
  */build/asan) exit "${STUB_ASAN_RC:-0}" ;;
esac
exit 99
STUB
chmod +x "$scratch/bin/cmake" "$scratch/bin/ctest"

failed=0
# Whether process PID is still running. A zombie has ended (only its exit
# status waits for init to collect it), though `kill -0` still finds it: the
# Asan build killed by run-all's EXIT trap is often one for a moment.
running() {
  local state
  state=$(sed 's/.*) //' "/proc/$1/stat" 2> /dev/null | cut -d' ' -f1) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}
# run_case NAME WANT_RC WANT_TEXT [VAR=VALUE...]
run_case() {
  local name=$1 want_rc=$2 want_text=$3; shift 3
  rm -rf "$scratch/tree/build" "$scratch/asan_build.pid" "$scratch"/chroot*.done
  local began=$SECONDS
  env PATH="$scratch/bin:$PATH" STUB_DIR="$scratch" "$@" bash "$scratch/tree/tests/run-all.sh" \
    > "$scratch/out" 2>&1
  local rc=$? took=$(( SECONDS - began ))
  local bad=""
  [ "$rc" = "$want_rc" ] || bad="exit $rc, want $want_rc"
  grep -q "$want_text" "$scratch/out" || bad="$bad; no \"$want_text\" in its output"
  [ "$took" -lt 20 ] || bad="$bad; took $took s (it waited for the Asan build)"
  if [ -s "$scratch/asan_build.pid" ] && running "$(cat "$scratch/asan_build.pid")"; then
    bad="$bad; the Asan build outlived it"
    kill "$(cat "$scratch/asan_build.pid")"
  fi
  if [ "$(id -u)" = 0 ] && [ ! -e "$scratch/chroot--python-build.done" ]; then
    bad="$bad; the Python package's build chroot was not made"
  fi
  if [ -n "$bad" ]; then
    echo "FAIL $name: ${bad#; }"; sed 's/^/  | /' "$scratch/out"; failed=1
  else
    echo "ok   $name (exit $rc)"
  fi
}
run_case "every suite passes" 0 "run-all: finished in"
run_case "chroots made while it compiles" 0 "run-all: finished in" STUB_CHROOT_SECONDS=3
run_case "Release suites fail" 8 "stub ctest in release" STUB_RELEASE_RC=8 STUB_ASAN_BUILD_SECONDS=60
run_case "Asan build fails" 1 "stub compiler error" STUB_ASAN_BUILD_RC=2
run_case "Asan suites fail" 5 "waiting for the Asan build" STUB_ASAN_RC=5
exit "$failed"
