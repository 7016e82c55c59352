#!/bin/bash
# optstate's DCP commands on real FSDP2 checkpoints (2 and 3 ranks), checked by
# torch 2.6 (tests/interop/check_dcp.py says what is compared).
# Usage: tests/interop/check_dcp.sh OPTSTATE_BINARY     Skips like with_torch26.sh.
set -uo pipefail
bin=$(readlink -f "$1")
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
scratch=testdata/.dcp-check
trap 'rm -rf "$scratch"' EXIT
rm -rf "$scratch" && mkdir -p "$scratch"
for name in fsdp2_dcp fsdp2_3rank_dcp; do
  in=testdata/good/torch26/$name
  "$bin" consolidate "$in" -o "$scratch/$name.fqn.pt" -q > /dev/null || { echo "FAIL consolidate $in"; exit 1; }
  "$bin" consolidate "$in" -o "$scratch/$name.index.pt" --to index -q > /dev/null ||
    { echo "FAIL consolidate --to index $in"; exit 1; }
done
bash tests/interop/with_torch26.sh tests/interop/check_dcp.py "$scratch"
