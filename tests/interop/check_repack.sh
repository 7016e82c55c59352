#!/bin/bash
# optstate repack of every fixture, read back by real torch 1.13 and torch 2.6
# (weights_only=True) and compared with what they read from the originals.
# Usage: tests/interop/check_repack.sh OPTSTATE_BINARY
# DTensor fixtures (FSDP2 per-rank files) are checked under torch 2.6 only.
# Skips like with_torch26.sh.
set -uo pipefail
. "$(dirname "$0")/check_setup.sh" "$1" repack
for f in testdata/good/*/*.pt testdata/good/*/*.pt.zst; do
  line=$(basename "$(dirname "$f")")
  mkdir -p "$scratch/$line"
  "$bin" repack "$f" -o "$scratch/$line/$(basename "$f").pt" > /dev/null || { echo "FAIL repack $f"; exit 1; }
done
echo "== torch 1.13"
/usr/bin/python3 tests/interop/check_repacked.py "$scratch" | grep -v '^ok'
[ "${PIPESTATUS[0]}" = 0 ] || exit 1
echo "== torch 2.6"
bash tests/interop/with_torch26.sh tests/interop/check_repacked.py "$scratch" | grep -v '^ok'
exit "${PIPESTATUS[0]}"
