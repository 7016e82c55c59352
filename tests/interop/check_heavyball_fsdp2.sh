#!/bin/bash
# Real HeavyBall 0.24.4 + FSDP2 rank files (testdata/heavyball/): optstate's
# collisions and remap checked against the truth the generator recorded while
# training, and the remapped files loaded by torch 2.6 with weights_only=True.
# Usage: tests/interop/check_heavyball_fsdp2.sh OPTSTATE_BINARY. Skips like with_torch26.sh.
set -uo pipefail
bin=$(readlink -f "$1")
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
scratch=testdata/.heavyball-check
trap 'rm -rf "$scratch"' EXIT
rm -rf "$scratch"
src=testdata/heavyball/fsdp2_0.24.4
for case in adamw_foreach adamw_perparam soap; do
  for kind in "" .local; do
    out=$scratch/$case$kind
    mkdir -p "$out"
    files=("$src/$case/rank0.optim$kind.pt" "$src/$case/rank1.optim$kind.pt")
    models=(--model "$src/$case/rank0.model$kind.pt" --model "$src/$case/rank1.model$kind.pt")
    "$bin" collisions --json "${files[@]}" "${models[@]}" > "$out/collisions.json"
    [ $? = 1 ] || { echo "FAIL collisions $case$kind: expected exit 1"; exit 1; }
    "$bin" remap --on-collision reset "${files[@]}" "${models[@]}" -o "$out" > /dev/null ||
      { echo "FAIL remap $case$kind"; exit 1; }
    # Per rank, alone: the DTensor files carry their global shapes themselves.
    if [ -z "$kind" ]; then
      for r in 0 1; do
        "$bin" collisions --json "$src/$case/rank$r.optim.pt" --model "$src/$case/rank$r.model.pt" \
          > "$out/collisions.rank$r.json"
        [ $? = 1 ] || { echo "FAIL collisions $case rank $r: expected exit 1"; exit 1; }
      done
    fi
  done
done
bash tests/interop/with_torch26.sh tests/interop/check_heavyball_fsdp2.py "$src" "$scratch"
