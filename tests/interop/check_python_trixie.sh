#!/bin/bash
# The Python package on Debian trixie: Python 3.13, g++ 14, pybind11 2.13,
# CLI11 2.4 and torch 2.6, where bookworm's python_package test has 3.11, g++ 12,
# CLI11 2.1 and torch 1.13. A trixie chroot with the build packages
# (testdata/gen/torch26-chroot.sh with OPTSTATE_TORCH26_EXTRA) installs the
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
packages=g++,cmake,make,pkg-config,python3-dev,python3-pip,python3-setuptools,pybind11-dev
packages=$packages,nlohmann-json3-dev,libcli11-dev,libzstd-dev,python3-pytest,python3-jsonschema
if [ ! -x "$root/usr/bin/g++" ]; then
  [ "$(id -u)" = 0 ] || fail_or_skip "no build chroot at $root and not root"
  OPTSTATE_TORCH26_ROOT=$root OPTSTATE_TORCH26_EXTRA=$packages testdata/gen/torch26-chroot.sh ||
    fail_or_skip "building the trixie build chroot failed"
fi
case "$bin" in
  "$repo"/*) inside=/work/${bin#"$repo"/} ;;
  *) fail_or_skip "the binary $bin is outside the repository, which the chroot sees as /work" ;;
esac
OPTSTATE_TORCH26_ROOT=$root testdata/gen/torch26-python.sh tests/interop/python_trixie.py "$scratch" "$inside"
