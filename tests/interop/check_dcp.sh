#!/bin/bash
# optstate's DCP commands on real FSDP2 checkpoints (2 and 3 ranks), checked by
# torch 2.6 (tests/interop/check_dcp.py says what is compared): consolidate
# against dcp_to_torch_save, and reshard/export outputs loaded by dcp.load into
# FSDP2 models of their world size.
# Usage: tests/interop/check_dcp.sh OPTSTATE_BINARY     Skips like with_torch26.sh.
set -uo pipefail
. "$(dirname "$0")/check_setup.sh" "$1" dcp
for name in fsdp2_dcp fsdp2_3rank_dcp; do
  in=testdata/good/torch26/$name
  "$bin" consolidate "$in" -o "$scratch/$name.fqn.pt" -q > /dev/null || { echo "FAIL consolidate $in"; exit 1; }
  "$bin" consolidate "$in" -o "$scratch/$name.index.pt" --to index -q > /dev/null ||
    { echo "FAIL consolidate --to index $in"; exit 1; }
done
# reshard and export: NAME SOURCE_FIXTURE WORLD COMMAND...
written() {
  local name=$1 source=$2 world=$3
  shift 3
  "$bin" "$@" -o "$scratch/$name.dcp" --world-size "$world" -q > /dev/null || { echo "FAIL $*"; exit 1; }
  "$bin" consolidate "$scratch/$name.dcp" -o "$scratch/$name.dcp.ours.pt" -q > /dev/null || { echo "FAIL consolidate $name"; exit 1; }
  echo "$source" > "$scratch/$name.dcp.source"
  echo "$world" > "$scratch/$name.dcp.world"
}
written reshard_2_to_3 fsdp2_dcp 3 reshard testdata/good/torch26/fsdp2_dcp
written reshard_3_to_2 fsdp2_3rank_dcp 2 reshard testdata/good/torch26/fsdp2_3rank_dcp
written reshard_2_to_1 fsdp2_dcp 1 reshard testdata/good/torch26/fsdp2_dcp
written export_to_3 fsdp2_dcp 3 export testdata/good/torch26/fsdp2_dcp.consolidated.pt
written export_to_4 fsdp2_3rank_dcp 4 export testdata/good/torch26/fsdp2_3rank_dcp.consolidated.pt
bash tests/interop/with_torch26.sh tests/interop/check_dcp.py "$scratch" || exit 1
# Index-keyed optimizer state exported with FQN keys, loaded through torch's DSD (check_export_fqn.py).
fw=testdata/frameworks
"$bin" export $fw/plain_torch26/adamw_rng_state.pt -o "$scratch/adamw_rng_state.dcp" --world-size 2 -q > /dev/null &&
  "$bin" export $fw/wrapped_torch26/ddp.pt -o "$scratch/ddp.dcp" --world-size 2 -q > /dev/null &&
  "$bin" export $fw/safetensors_torch26/unique/optimizer.bin --model $fw/safetensors_torch26/unique/model.safetensors \
    -o "$scratch/safetensors_unique.dcp" --world-size 3 -q > /dev/null &&
  "$bin" export $fw/plain_torch26/two_optimizers.pt -o "$scratch/two_optimizers.dcp" --world-size 2 -q > /dev/null ||
  { echo "FAIL export of index-keyed state"; exit 1; }
bash tests/interop/with_torch26.sh tests/interop/check_export_fqn.py "$scratch" || exit 1
# torchtitan's layout (optimizer flattened by DSD): consolidated both ways (check_flattened_dcp.py).
tt=$fw/torchtitan_layout_torch26
"$bin" consolidate $tt/flattened_dcp -o "$scratch/flattened.fqn.pt" -q > /dev/null &&
  "$bin" consolidate --to index $tt/flattened_dcp -o "$scratch/flattened.index.pt" -q > /dev/null ||
  { echo "FAIL consolidate of the torchtitan layout"; exit 1; }
bash tests/interop/with_torch26.sh tests/interop/check_flattened_dcp.py $tt "$scratch" || exit 1
# Checkpoints torchtitan v0.1.0's CheckpointManager wrote (FSDP2, 2 ranks): consolidated both ways.
titan=$fw/torchtitan_0.1.0
"$bin" consolidate $titan/run/checkpoint/step-6 -o "$scratch/titan.fqn.pt" -q > /dev/null &&
  "$bin" consolidate --to index $titan/run/checkpoint/step-6 -o "$scratch/titan.index.pt" -q > /dev/null ||
  { echo "FAIL consolidate of torchtitan's checkpoint"; exit 1; }
bash tests/interop/with_torch26.sh tests/interop/check_torchtitan_run.py $titan "$scratch" || exit 1
# DeepSpeed 0.16.4's own ZeRO-1/2/3 directories and its two bf16 runs (check_zero.py's CASES):
# consolidated both ways, the index file exported to DCP, each loaded into AdamW and compared with
# DeepSpeed's zero_to_fp32 and its per-parameter optimizer state (check_zero.py).
ds=$fw/deepspeed_0.16.4
for stage in 1 2 3 2-bf16 1-bf16-fp32accum; do
  "$bin" consolidate $ds/zero$stage -o "$scratch/zero$stage.index.pt" --to index -q > /dev/null &&
    "$bin" consolidate $ds/zero$stage -o "$scratch/zero$stage.fqn.pt" -q > /dev/null &&
    "$bin" export "$scratch/zero$stage.index.pt" -o "$scratch/zero$stage.dcp" --world-size 2 -q > /dev/null ||
    { echo "FAIL consolidate/export of DeepSpeed ZeRO-$stage"; exit 1; }
done
bash tests/interop/with_torch26.sh tests/interop/check_zero.py "$scratch" || exit 1
