#!/bin/bash
# The Python package on Debian trixie: Python 3.13, g++ 14, pybind11 2.13,
# CLI11 2.4 and torch 2.6, where bookworm's python_package test has 3.11, g++ 12,
# CLI11 2.1 and torch 1.13. A trixie chroot with the build packages
# (testdata/gen/torch26-chroot.sh --python-build) installs the
# package with pip as README.md says and runs all of python/tests there
# (python_trixie.py), comparing with this tree's binary (bookworm's: trixie runs
# it). Needs root and the Debian mirror; skips loudly otherwise, except under CI.
# Usage: tests/interop/check_python_trixie.sh OPTSTATE_BINARY
set -uo pipefail
. "$(dirname "$0")/check_setup.sh" "$1" python-trixie
trap 'rm -rf "$scratch" python/build python/*.egg-info' EXIT
fail_or_skip() {
  echo "************************************************************************" >&2
  echo "PYTHON ON TRIXIE NOT CHECKED: $1" >&2
  echo "************************************************************************" >&2
  if [ "${CI:-}" = "true" ]; then exit 1; fi
  exit 77
}
root=${OPTSTATE_TRIXIE_BUILD_ROOT:-/var/cache/optstate-trixie-build}
# Builds the chroot, or waits while tests/run-all.sh builds it, or checks it.
if [ "$(id -u)" = 0 ]; then
  testdata/gen/torch26-chroot.sh --python-build || fail_or_skip "building the trixie build chroot failed"
elif [ ! -x "$root/usr/bin/g++" ]; then
  fail_or_skip "no build chroot at $root and not root"
fi
case "$bin" in
  "$repo"/*) inside=/work/${bin#"$repo"/} ;;
  *) fail_or_skip "the binary $bin is outside the repository, which the chroot sees as /work" ;;
esac
OPTSTATE_TORCH26_ROOT=$root testdata/gen/torch26-python.sh tests/interop/python_trixie.py "$scratch" "$inside"
