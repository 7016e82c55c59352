#!/bin/bash
# The whole test suite, as the README's second command and .ci/run give it:
# install dependencies, make the torch 2.6 chroots while building Release, and
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
# The two trixie chroots (torch 2.6 for the interop suites; the same with compilers
# for python_trixie, the last Release suite) are mostly downloading and unpacking,
# 4-6 minutes on a fresh machine: they are made while the Release build compiles.
# The suites start once the first is ready; python_trixie waits for the second, as
# torch26-chroot.sh takes turns per chroot. They are waited for, never killed, on
# any exit: a killed mmdebstrap can leave its mounts behind.
torch26_chroot="" trixie_chroot=""
if [ "$(id -u)" = 0 ]; then
  testdata/gen/torch26-chroot.sh > build-torch26.log 2>&1 &
  torch26_chroot=$!
  testdata/gen/torch26-chroot.sh --python-build > build-trixie.log 2>&1 &
  trixie_chroot=$!
fi
asan_build=""
# However this script ends, no compiler of the Asan build outlives it (the pid
# itself too: a script failing at once may end before setsid made the group).
# Each kill or wait may find nothing; under set -e a failing command in the trap
# would become the script's exit code, so none may fail.
trap 'if [ -n "$asan_build" ]; then kill -- "-$asan_build" 2> /dev/null || true; kill "$asan_build" 2> /dev/null || true; fi
      wait $torch26_chroot $trixie_chroot 2> /dev/null || true' EXIT
jobs=$(nproc)
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release > build-release.log 2>&1 ||
  { cat build-release.log; exit 1; }
cmake --build build/release -j "$jobs"
if [ -n "$torch26_chroot" ]; then
  wait "$torch26_chroot" || echo "torch 2.6 chroot could not be built; its tests will say so" >&2
  cat build-torch26.log >&2
fi
cmake -S . -B build/asan -DCMAKE_BUILD_TYPE=Asan > build-asan.log 2>&1 || { cat build-asan.log; exit 1; }
setsid -w nice -n 19 cmake --build build/asan -j "$jobs" > build-asan.log 2>&1 &
asan_build=$!
(cd build/release && ctest --output-on-failure)
echo "run-all: Release suites passed after $(( $(date +%s) - start )) s; waiting for the Asan build"
wait "$asan_build" || { tail -60 build-asan.log; exit 1; }
# The sanitized suites have the machine to themselves and are mostly one
# process each: as many at once as there are cores (dcp_distributed, which
# times its processes, runs alone).
(cd build/asan && ctest --output-on-failure -j "$jobs")
rm -f build-release.log build-asan.log build-torch26.log build-trixie.log
echo "run-all: finished in $(( $(date +%s) - start )) s"
