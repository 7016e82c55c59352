#!/bin/bash
# ZeRO checkpoints from DeepSpeed itself (not part of regenerate.sh: CI cannot fetch).
#
# Usage: testdata/gen/deepspeed-fixtures.sh DEEPSPEED_GIT_DIR [CASE...]
#   DEEPSPEED_GIT_DIR  a clone or mirror of github.com/microsoft/DeepSpeed; tag v0.16.4 is used
#   CASE               as gen_deepspeed_zero.py takes them (1, 2, 3, 2-bf16, 1-bf16-fp32accum): only
#                      their outputs are replaced, the rest of the directory stays as committed
# Extracts it with `git archive` into the torch 2.6 chroot's /var/tmp (outside this repository),
# installs what it imports from Debian trixie, runs gen_deepspeed_zero.py there (stages 1, 2, 3;
# 2 ranks, gloo, DS_ACCELERATOR=cpu), and replaces testdata/frameworks/deepspeed_0.16.4/ with
# what it wrote, minus the copy of DeepSpeed's own zero_to_fp32.py that save_checkpoint puts
# in every checkpoint directory (its code is never committed here; truth.json lists it).
set -euo pipefail
git_dir=${1:?usage: $0 DEEPSPEED_GIT_DIR [CASE...]}
shift
cases=("$@")
. "$(dirname "$0")/library-source.sh"
install_in_chroot python3-hjson python3-cpuinfo python3-pydantic python3-msgpack python3-einops \
  python3-setuptools python3-tqdm
inside=$(extract_source "$git_dir" v0.16.4 deepspeed-0.16.4 deepspeed op_builder accelerator version.txt)
stage=testdata/frameworks/.deepspeed.new
rm -rf "$repo/$stage"
"$here/torch26-python.sh" testdata/gen/gen_deepspeed_zero.py "$inside" "$stage" "${cases[@]}"
find "$repo/$stage" -name zero_to_fp32.py -delete
dest="$repo/testdata/frameworks/deepspeed_0.16.4"
if [ ${#cases[@]} -eq 0 ]; then
  rm -rf "$dest"
  mv "$repo/$stage" "$dest"
else
  mkdir -p "$dest"
  for made in "$repo/$stage"/*; do
    rm -rf "${dest:?}/$(basename "$made")"
    mv "$made" "$dest/"
  done
  rmdir "$repo/$stage"
fi
du -sh "$repo/testdata/frameworks/deepspeed_0.16.4"
