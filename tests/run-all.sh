#!/bin/bash
# The whole test suite, as the README's second command and .ci/run give it:
# install dependencies, make sure the torch 2.6 chroot exists, build Release and
# run every ctest suite (unit, CLI golden, JSON schemas, interop with torch 1.13
# and 2.6, fixture regeneration, faults, fuzz corpora), then run the suites that
# reach optstate's own code again with the Asan type (AddressSanitizer + UBSan).
# The Asan type compiles at the lowest priority while the Release suites run:
# they mostly wait on torch's Python and on timeouts, and the compiler would
# otherwise have the machine to itself for a quarter of an hour afterwards.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
start=$(date +%s)
bash .ci/install-deps --tests
if [ "$(id -u)" = 0 ]; then
  testdata/gen/torch26-chroot.sh || echo "torch 2.6 chroot could not be built; its tests will say so" >&2
fi
jobs=$(nproc)
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release > build-release.log 2>&1 ||
  { cat build-release.log; exit 1; }
cmake --build build/release -j "$jobs"
cmake -S . -B build/asan -DCMAKE_BUILD_TYPE=Asan > build-asan.log 2>&1 || { cat build-asan.log; exit 1; }
setsid -w nice -n 19 cmake --build build/asan -j "$jobs" > build-asan.log 2>&1 &
asan_build=$!
# However this script ends, no compiler of that build outlives it (the pid
# itself too: a script failing at once may end before setsid made the group).
# Each kill may find nothing; under set -e a failing command in the trap would
# become the script's exit code, so neither may fail.
trap 'kill -- "-$asan_build" 2> /dev/null || true; kill "$asan_build" 2> /dev/null || true' EXIT
(cd build/release && ctest --output-on-failure)
echo "run-all: Release suites passed after $(( $(date +%s) - start )) s; waiting for the Asan build"
wait "$asan_build" || { tail -60 build-asan.log; exit 1; }
(cd build/asan && ctest --output-on-failure)
rm -f build-release.log build-asan.log
echo "run-all: finished in $(( $(date +%s) - start )) s"
