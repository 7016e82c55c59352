#!/bin/bash
# Runs a python script under torch 2.6 (testdata/gen/torch26-python.sh), making the
# chroot first when it is missing and this is root. When torch 2.6 cannot be had,
# says so loudly and exits 77 (ctest: skipped) -- except under CI (CI=true), where
# torch 2.6 interop is required and its absence fails the suite.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
fail_or_skip() {
  echo "************************************************************************" >&2
  echo "TORCH 2.6 NOT AVAILABLE: $1" >&2
  echo "Interop tests against torch 2.6 did NOT run. Build the chroot as root with" >&2
  echo "  testdata/gen/torch26-chroot.sh" >&2
  echo "or point OPTSTATE_TORCH26_PYTHON at a python with torch 2.6." >&2
  echo "************************************************************************" >&2
  if [ "${CI:-}" = "true" ]; then exit 1; fi
  exit 77
}
if [ -z "${OPTSTATE_TORCH26_PYTHON:-}" ]; then
  root=${OPTSTATE_TORCH26_ROOT:-/var/cache/optstate-torch26}
  if [ ! -x "$root/usr/bin/python3" ]; then
    [ "$(id -u)" = 0 ] || fail_or_skip "no chroot at $root and not root"
    "$repo/testdata/gen/torch26-chroot.sh" || fail_or_skip "building the chroot failed"
  fi
fi
exec "$repo/testdata/gen/torch26-python.sh" "$@"
