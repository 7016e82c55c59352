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
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
mirrors=${1:?usage: $0 MIRRORS}
root=${OPTSTATE_TORCH26_ROOT:-/var/cache/optstate-torch26}
"$here/torch26-chroot.sh"
unshare --mount --propagation private bash -c '
  r=$1; mount -t proc proc "$r/proc"; mount --rbind /dev "$r/dev"
  chroot "$r" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq python3-tqdm >&2' _ "$root"
paths=()
for spec in "huggingface+accelerate v1.14.0" "huggingface+huggingface_hub v0.36.2" \
            "Lightning-AI+pytorch-lightning 2.5.6" "Lightning-AI+utilities v0.14.3" \
            "Lightning-AI+torchmetrics v1.8.2"; do
  set -- $spec
  inside=/var/tmp/fw-${1#*+}-$2
  rm -rf --one-file-system "$root$inside"
  mkdir -p "$root$inside"
  git --git-dir="$mirrors/$1/repo" archive "$2" src | tar -x -C "$root$inside"
  paths+=("$inside/src")
done
src=$(IFS=:; echo "${paths[*]}")
stage=testdata/frameworks/.runs_torch26.new
rm -rf "$repo/$stage"
"$here/torch26-python.sh" testdata/gen/gen_framework_runs.py "$src" "$stage"
rm -rf "$repo/testdata/frameworks/runs_torch26"
mv "$repo/$stage" "$repo/testdata/frameworks/runs_torch26"
du -sh "$repo/testdata/frameworks/runs_torch26"
