#!/bin/bash
# The whole test suite, as the README's second command and .ci/run give it:
# install dependencies, make sure the torch 2.6 chroot exists, build Release and
# run every ctest suite (unit, CLI golden, JSON schemas, interop with torch 1.13
# and 2.6, fixture regeneration, faults, fuzz corpora), then build the Asan type
# (AddressSanitizer + UBSan) and run every suite again with its binaries: the
# interop suites then drive the sanitized optstate (about 4 more minutes).
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
(cd build/release && ctest --output-on-failure)
cmake -S . -B build/asan -DCMAKE_BUILD_TYPE=Asan > build-asan.log 2>&1 || { cat build-asan.log; exit 1; }
cmake --build build/asan -j "$jobs"
(cd build/asan && ctest --output-on-failure)
rm -f build-release.log build-asan.log
echo "run-all: finished in $(( $(date +%s) - start )) s"
