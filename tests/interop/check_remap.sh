#!/bin/bash
# optstate remap of every pointer-keyed fixture, checked by real torch 1.13 and
# 2.6 against the generator's truth (check_remapped.py): with the manifest, and
# where the file allows it with the parameters from a model state_dict. The
# collision fixture is remapped with each of --on-collision drop, share and
# reset; the default refusal is a golden CLI case.
# Usage: tests/interop/check_remap.sh OPTSTATE_BINARY. Skips like with_torch26.sh.
set -uo pipefail
bin=$(readlink -f "$1")
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
scratch=testdata/.remap-check
wrapped=testdata/.remap-check-wrapped
groups=testdata/.remap-check-groups
trap 'rm -rf "$scratch" "$wrapped" "$groups"' EXIT
rm -rf "$scratch" "$wrapped" "$groups"
remap() {  # remap SRC_NAME VARIANT ARGS...: $scratch/$line/NAME.VARIANT.pt
  local name=$1 variant=$2
  shift 2
  "$bin" remap "$@" testdata/good/$line/$name.pt -o "$scratch/$line/$name.$variant.pt" > /dev/null ||
    { echo "FAIL remap $line/$name ($variant): $*"; exit 1; }
}
for line in torch113 torch26; do
  mkdir -p "$scratch/$line"
  for name in heavyball_ptr_shape heavyball_bare_ptr ptr_shape_fp16 heavyball_param_view heavyball_tied \
      heavyball_orphan; do
    remap $name manifest --manifest testdata/good/$line/$name.manifest.json
  done
  for policy in drop share reset; do
    remap heavyball_fsdp_collision $policy --on-collision $policy \
      --manifest testdata/good/$line/heavyball_fsdp_collision.manifest.json
  done
  # The parameters from a model state_dict instead of a manifest: the file's own
  # 'model' entry, or a separate model file.
  remap heavyball_param_view ownmodel
  remap heavyball_tied ownmodel
  remap heavyball_tied model --model testdata/good/$line/heavyball_tied_model.pt
done
# FSDP2 rank files: DTensor values carried through, keys to FQNs from the model
# of torch's own dcp_to_torch_save.
line=torch26
for rank in 0 1; do
  remap fsdp2_rank${rank}_optim fqn --to fqn --model testdata/good/torch26/fsdp2_dcp.consolidated.pt
done
# Wrapped models (DDP, torch.compile, activation checkpointing): FQNs without the wrappers'
# segments, loaded by torch 2.6's set_optimizer_state_dict (check_wrapped_fqn.py).
mkdir -p "$wrapped"
for name in ddp compiled checkpoint_wrapped; do
  "$bin" remap --to fqn testdata/frameworks/wrapped_torch26/$name.pt -o "$wrapped/$name.fqn.pt" > /dev/null ||
    { echo "FAIL remap --to fqn $name"; exit 1; }
done
# Several param groups and frozen parameters, without a manifest: the assignment derived from the
# file is the generator's truth (the same bytes as with its manifest), and torch 2.6's
# set_optimizer_state_dict takes the FQN output (check_param_groups.py).
mkdir -p "$groups/derived" "$groups/truth"
for line in torch113 torch26; do
  for name in hf_decay_split timm_ndim_split torchvision_norm frozen_embedding frozen_and_split many_buffers; do
    in=testdata/frameworks/groups_$line/$name.pt
    for to in index fqn; do
      "$bin" remap --to $to "$in" -o "$groups/derived/$name.$to.pt" > /dev/null &&
        "$bin" remap --to $to --manifest "${in%.pt}.manifest.json" "$in" -o "$groups/truth/$name.$to.pt" > /dev/null ||
        { echo "FAIL remap --to $to $in"; exit 1; }
      cmp -s "$groups/derived/$name.$to.pt" "$groups/truth/$name.$to.pt" ||
        { echo "FAIL $in --to $to: the order derived from the file is not its manifest's"; exit 1; }
      [ $line = torch26 ] || rm "$groups/derived/$name.$to.pt"
    done
  done
done
echo "ok: 6 param-group cases x 2 torch versions x --to index/fqn: derived order == manifest truth"
echo "== torch 1.13"
/usr/bin/python3 tests/interop/check_remapped.py "$scratch" | grep -v '^ok'
[ "${PIPESTATUS[0]}" = 0 ] || exit 1
echo "== torch 2.6"
bash tests/interop/with_torch26.sh tests/interop/check_remapped.py "$scratch" | grep -v '^ok'
[ "${PIPESTATUS[0]}" = 0 ] || exit 1
bash tests/interop/with_torch26.sh tests/interop/check_wrapped_fqn.py testdata/frameworks/wrapped_torch26 "$wrapped" || exit 1
bash tests/interop/with_torch26.sh tests/interop/check_param_groups.py testdata/frameworks/groups_torch26 "$groups/derived"
