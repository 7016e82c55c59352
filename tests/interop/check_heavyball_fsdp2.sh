#!/bin/bash
# Real HeavyBall 0.24.4 + FSDP2 rank files (testdata/heavyball/): optstate's
# collisions and remap checked against the truth the generator recorded while
# training, and the remapped files loaded by torch 2.6 with weights_only=True;
# unshard checked against the shards, and unshard + export loaded into FSDP2 at
# world sizes 1, 2 and 3 (check_heavyball_unshard.py).
# Usage: tests/interop/check_heavyball_fsdp2.sh OPTSTATE_BINARY. Skips like with_torch26.sh.
set -uo pipefail
. "$(dirname "$0")/check_setup.sh" "$1" heavyball
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
    # The repaired rank set passes validate: SOAP's merged view [64, 27] of the [64, 3, 3, 3]
    # conv weight is its state's shape, not a mismatch (reset entries at step 0 stay a warning).
    if [ -z "$kind" ]; then
      "$bin" validate --json "$out/rank0.optim$kind.pt" "$out/rank1.optim$kind.pt" "${models[@]}" > "$out/validate.json" ||
        { echo "FAIL validate of the remapped $case rank set: $(grep -o '"rule": "[a-z-]*"' "$out/validate.json" | sort | uniq -c)"; exit 1; }
    fi
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
# unshard each case's rank files as saved; and the repaired adamw_foreach save
# (remap --to fqn --on-collision reset, then unshard) exported to DCP for FSDP2.
for case in adamw_foreach adamw_perparam soap; do
  mkdir -p "$scratch/$case.unsharded"
  for what in optim model; do
    "$bin" unshard -q "$src/$case/rank0.$what.pt" "$src/$case/rank1.$what.pt" \
      -o "$scratch/$case.unsharded/$what.pt" > /dev/null || { echo "FAIL unshard $case $what"; exit 1; }
  done
done
mkdir -p "$scratch/fixed"
"$bin" remap --to fqn --on-collision reset "$src/adamw_foreach/rank0.optim.pt" "$src/adamw_foreach/rank1.optim.pt" \
  --model "$src/adamw_foreach/rank0.model.pt" --model "$src/adamw_foreach/rank1.model.pt" -o "$scratch/fixed" \
  > /dev/null || { echo "FAIL remap --to fqn"; exit 1; }
"$bin" unshard -q "$scratch/fixed/rank0.optim.pt" "$scratch/fixed/rank1.optim.pt" -o "$scratch/fixed.optim.pt" \
  > /dev/null || { echo "FAIL unshard fixed"; exit 1; }
cp "$scratch/adamw_foreach.unsharded/model.pt" "$scratch/fixed.model.pt"
"$bin" export -q --world-size 2 "$scratch/fixed.optim.pt" -o "$scratch/dcp_optim" > /dev/null &&
  "$bin" export -q --world-size 2 "$scratch/fixed.model.pt" -o "$scratch/dcp_model" > /dev/null ||
  { echo "FAIL export"; exit 1; }
# migrate --on-collision reset of the rank set, both layouts: each parameter that shared an
# entry (truth.rank0.json: more than one parameter under its key) starts fresh (zero moments;
# --to torch, step 0), every other keeps moments that are not all zero.
for to in torch heavyball3; do
  "$bin" migrate --to $to --on-collision reset "$src/adamw_foreach/rank0.optim.pt" "$src/adamw_foreach/rank1.optim.pt" \
    --model "$src/adamw_foreach/rank0.model.pt" --model "$src/adamw_foreach/rank1.model.pt" \
    -o "$scratch/reset.$to.pt" > /dev/null || { echo "FAIL migrate --to $to --on-collision reset"; exit 1; }
done
/usr/bin/python3 - "$src/adamw_foreach/truth.rank0.json" "$scratch/reset.torch.pt" "$scratch/reset.heavyball3.pt" <<'PY' ||
import collections, json, sys, torch
truth = json.load(open(sys.argv[1]))
keys = [tuple(map(str, p["keys"][0])) for p in truth["params"]]
shared = {i for i, k in enumerate(keys) if collections.Counter(keys)[k] > 1}
for path, moments in ((sys.argv[2], ("exp_avg", "exp_avg_sq")),
                      (sys.argv[3], ("update_by_adam_exp_avg_0", "update_by_adam_exp_avg_sq_0"))):
    state = torch.load(path)["state"]
    for i in range(len(keys)):
        entry = state[i] if "exp_avg" in moments else state[i][0]
        zero = all(float(entry[m].abs().sum()) == 0 for m in moments)
        if zero != (i in shared):
            sys.exit(f"FAIL {path}: parameter {i} ({truth['params'][i]['name']}) has "
                     f"{'zero' if zero else 'carried-over'} moments, collided: {i in shared}")
        if "exp_avg" in moments and i in shared and float(entry["step"]) != 0:
            sys.exit(f"FAIL {path}: reset parameter {i} is at step {float(entry['step'])}, not 0")
print(f"ok: migrate --on-collision reset: {len(shared)} collided parameters fresh, {len(keys) - len(shared)} carried over, in both layouts")
PY
  exit 1
# FSDP2 + TP (4 ranks, 2 x 2 mesh): unshard as saved; remap --to fqn keeps each shard;
# that remap unsharded (the reference) and, as a rank set, exported for a 2 x 2 FSDP2 + TP
# load, as the model's rank set is (check_heavyball_tp.py).
tp=testdata/heavyball/fsdp2_tp_0.24.4
mkdir -p "$scratch/tp.unsharded" "$scratch/tp.fqn"
for what in optim model; do
  "$bin" unshard -q "$tp"/rank{0,1,2,3}.$what.pt -o "$scratch/tp.unsharded/$what.pt" > /dev/null ||
    { echo "FAIL unshard tp $what"; exit 1; }
done
"$bin" remap --to fqn "$tp"/rank{0,1,2,3}.optim.pt --model "$tp/rank0.model.pt" --model "$tp/rank1.model.pt" \
  --model "$tp/rank2.model.pt" --model "$tp/rank3.model.pt" -o "$scratch/tp.fqn" > /dev/null ||
  { echo "FAIL remap tp"; exit 1; }
"$bin" unshard -q "$scratch"/tp.fqn/rank{0,1,2,3}.optim.pt -o "$scratch/tp.fixed.optim.pt" > /dev/null &&
  cp "$scratch/tp.unsharded/model.pt" "$scratch/tp.fixed.model.pt" &&
  "$bin" export -q --world-size 4 "$scratch"/tp.fqn/rank{0,1,2,3}.optim.pt -o "$scratch/tp.dcp_optim" > /dev/null &&
  "$bin" export -q --world-size 4 "$tp"/rank{0,1,2,3}.model.pt -o "$scratch/tp.dcp_model" > /dev/null ||
  { echo "FAIL unshard/export tp"; exit 1; }
# export of a rank set unshards into a scratch directory beside the output: none may stay.
left=$(find "$scratch" -maxdepth 1 -name '.*.unsharded.tmp-*')
[ -z "$left" ] || { echo "FAIL export left its scratch: $left"; exit 1; }
bash tests/interop/with_torch26.sh tests/interop/check_heavyball_fsdp2.py "$src" "$scratch" || exit 1
bash tests/interop/with_torch26.sh tests/interop/check_heavyball_tp.py "$tp" "$scratch" || exit 1
bash tests/interop/with_torch26.sh tests/interop/check_heavyball_unshard.py "$src" "$scratch"
