#!/bin/bash
# The committed fixtures are reproducible: regenerate everything from the scripts
# in testdata/gen/ (torch 1.13 and 2.6) into a scratch directory and compare the
# descriptions with the committed ones. Values are seeded, so they must match
# exactly; only what depends on allocator addresses is masked (pointer-valued
# state keys, the file sizes, offsets and CRCs of files that contain them, and the
# size of legacy-format files, which name storages by address, and the bytes of
# files holding DTensors, whose DeviceMesh pickles a per-run Python hash).
# Skips (exit 77) like with_torch26.sh when torch 2.6 cannot be had outside CI.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
scratch=testdata/.regen-check
trap 'rm -rf "$scratch" "$scratch.new"' EXIT
bash tests/interop/with_torch26.sh -c 'import torch' || exit $?
testdata/gen/regenerate.sh "$scratch" > /dev/null || { echo "regenerate.sh failed"; exit 1; }
exec /usr/bin/python3 tests/interop/compare_regenerated.py testdata/good "$scratch"
