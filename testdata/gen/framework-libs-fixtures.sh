#!/bin/bash
# Checkpoints written by real Lightning and accelerate (not part of regenerate.sh: CI cannot fetch).
#
# Usage: testdata/gen/framework-libs-fixtures.sh MIRRORS
#   MIRRORS  a folder holding git clones or mirrors named as `fetch` names them:
#            Lightning-AI+pytorch-lightning, Lightning-AI+utilities, Lightning-AI+torchmetrics,
#            huggingface+accelerate, huggingface+huggingface_hub (each with repo/ inside, or bare)
# Extracts each library's src/ at its tag into the torch 2.6 chroot (outside this repository;
# no library code is committed here), installs their imports from Debian trixie there, runs:
#   gen_lightning_checkpoint.py -> testdata/frameworks/lightning_2.6.5/step6.ckpt
#     pytorch-lightning 2.6.5, utilities v0.15.3, torchmetrics v1.8.2
#   gen_accelerate_state.py -> testdata/frameworks/accelerate_1.12.0/save_state/
#     accelerate v1.12.0, huggingface_hub v0.36.0
# HF transformers is not here (not in Debian, too large to fetch): training_args.bin replicas come
# from gen_hf_training_args.py, held to real files by tests/oracle/check_hf_training_args.py.
set -euo pipefail
mirrors=${1:?usage: $0 MIRRORS}
. "$(dirname "$0")/library-source.sh"
install_in_chroot python3-tqdm python3-yaml python3-fsspec python3-packaging python3-typing-extensions \
  python3-aiohttp python3-psutil python3-requests python3-filelock python3-safetensors

extract() {  # extract MIRROR TAG NAME -> the src/ path inside the chroot
  echo "$(extract_source "$mirrors/$1" "$2" "$3" src)/src"
}

stage=testdata/frameworks.libs.new
rm -rf "$repo/$stage"
mkdir -p "$repo/$stage"
lightning=$(extract Lightning-AI+pytorch-lightning 2.6.5 lightning-2.6.5)
utilities=$(extract Lightning-AI+utilities v0.15.3 lightning-utilities-0.15.3)
metrics=$(extract Lightning-AI+torchmetrics v1.8.2 torchmetrics-1.8.2)
"$here/torch26-python.sh" testdata/gen/gen_lightning_checkpoint.py "$lightning:$utilities:$metrics" "$stage"
accelerate=$(extract huggingface+accelerate v1.12.0 accelerate-1.12.0)
hub=$(extract huggingface+huggingface_hub v0.36.0 huggingface_hub-0.36.0)
"$here/torch26-python.sh" testdata/gen/gen_accelerate_state.py "$accelerate:$hub" "$stage"
for d in lightning_2.6.5 accelerate_1.12.0; do
  rm -rf "$repo/testdata/frameworks/$d"
  mv "$repo/$stage/$d" "$repo/testdata/frameworks/$d"
done
rm -rf "$repo/$stage"
