#!/bin/bash
# The committed fixtures are reproducible: regenerate everything from the scripts
# in testdata/gen/ (torch 1.13 and 2.6) into a scratch directory and compare the
# descriptions with the committed ones. Values are seeded, so on the CPU that made
# the fixtures they match exactly; only what depends on allocator addresses is
# masked (pointer-valued state keys, the file sizes, offsets and CRCs of files that
# contain them, and the size of legacy-format files, which name storages by
# address, and the bytes of files holding DTensors, whose DeviceMesh pickles a
# per-run Python hash). On a CPU with other kernels (AVX-512 where the fixtures
# were made with AVX2) values may differ by rounding: then floats are compared to
# about two ulps and CRCs are skipped (compare_regenerated.py says how many).
# Skips (exit 77) like with_torch26.sh when torch 2.6 cannot be had outside CI.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
scratch=testdata/.regen-check
trap 'rm -rf "$scratch" "$scratch.new"' EXIT
bash tests/interop/with_torch26.sh -c 'import torch' || exit $?
testdata/gen/regenerate.sh "$scratch" > /dev/null || { echo "regenerate.sh failed"; exit 1; }
exec /usr/bin/python3 tests/interop/compare_regenerated.py testdata/good "$scratch"
