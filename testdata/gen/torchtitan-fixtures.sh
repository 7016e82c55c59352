#!/bin/bash
# Checkpoints saved by torchtitan's own CheckpointManager (not part of regenerate.sh: CI cannot fetch).
#
# Usage: testdata/gen/torchtitan-fixtures.sh MIRRORS
#   MIRRORS  a directory holding bare clones named OWNER+NAME/repo (what `fetch` gives):
#            pytorch/torchtitan  v0.1.0   (later tags need torch >= 2.8: HuggingFaceStorageWriter)
#            pytorch/data        v0.11.0  (torchdata.stateful_dataloader, which torchtitan's dataloader is)
# Extracts the two packages with `git archive` into the torch 2.6 chroot's /var/tmp (outside this
# repository: their code is never committed here), runs gen_torchtitan_run.py there on 2 ranks,
# and replaces testdata/frameworks/torchtitan_0.1.0/ with what it wrote.
set -euo pipefail
mirrors=${1:?usage: $0 MIRRORS}
. "$(dirname "$0")/library-source.sh"
paths=()
for spec in "pytorch+torchtitan v0.1.0 torchtitan" "pytorch+data v0.11.0 torchdata"; do
  set -- $spec
  paths+=("$(extract_source "$mirrors/$1" "$2" "fw-${1#*+}-$2" "$3")")
done
src=$(IFS=:; echo "${paths[*]}")
stage=testdata/frameworks/.torchtitan.new
rm -rf "$repo/$stage"
"$here/torch26-python.sh" testdata/gen/gen_torchtitan_run.py "$src" "$stage"
rm -rf "$repo/testdata/frameworks/torchtitan_0.1.0"
mv "$repo/$stage" "$repo/testdata/frameworks/torchtitan_0.1.0"
du -sh "$repo/testdata/frameworks/torchtitan_0.1.0"
