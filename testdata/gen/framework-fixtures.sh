#!/bin/bash
# Fixtures saved by the frameworks' own code (not part of regenerate.sh: CI cannot fetch).
#
# Usage: testdata/gen/framework-fixtures.sh MIRRORS
#   MIRRORS  a directory holding bare clones named OWNER+NAME/repo (what `fetch` gives):
#            huggingface/accelerate           v1.14.0
#            huggingface/huggingface_hub      v0.36.2  (the last with requests, which accelerate imports)
#            Lightning-AI/pytorch-lightning   2.5.6
#            Lightning-AI/utilities           v0.14.3
#            Lightning-AI/torchmetrics        v1.8.2
# Extracts each tag's src/ with `git archive` into the torch 2.6 chroot's /var/tmp (outside
# this repository: their code is never committed here), installs what they import from
# Debian trixie (python3-tqdm), runs gen_framework_runs.py there, and replaces
# testdata/frameworks/runs_torch26/ with what it wrote.
set -euo pipefail
mirrors=${1:?usage: $0 MIRRORS}
. "$(dirname "$0")/library-source.sh"
install_in_chroot python3-tqdm
paths=()
for spec in "huggingface+accelerate v1.14.0" "huggingface+huggingface_hub v0.36.2" \
            "Lightning-AI+pytorch-lightning 2.5.6" "Lightning-AI+utilities v0.14.3" \
            "Lightning-AI+torchmetrics v1.8.2"; do
  set -- $spec
  paths+=("$(extract_source "$mirrors/$1" "$2" "fw-${1#*+}-$2" src)/src")
done
src=$(IFS=:; echo "${paths[*]}")
stage=testdata/frameworks/.runs_torch26.new
rm -rf "$repo/$stage"
"$here/torch26-python.sh" testdata/gen/gen_framework_runs.py "$src" "$stage"
rm -rf "$repo/testdata/frameworks/runs_torch26"
mv "$repo/$stage" "$repo/testdata/frameworks/runs_torch26"
du -sh "$repo/testdata/frameworks/runs_torch26"
