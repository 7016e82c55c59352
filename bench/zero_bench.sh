#!/bin/bash
# optstate on a >= 2 GiB DeepSpeed ZeRO checkpoint that DeepSpeed itself wrote,
# against cp -r of the same tag directory and DeepSpeed's own zero_to_fp32.
# Prints a Markdown table for BENCHMARKS.md.
#
# Usage: bench/zero_bench.sh OPTSTATE_BINARY DATADIR DEEPSPEED_GIT_DIR STAGE [RUNS=3]
# DATADIR/zeroSTAGE/ is made the first time by bench/make_big_zero.py in the torch
# 2.6 chroot (DeepSpeed v0.16.4 from DEEPSPEED_GIT_DIR, extracted there as
# testdata/gen/deepspeed-fixtures.sh does; 201 M parameters, 2 ranks, 3.1 GiB).
# Runs alternate between the commands, `sync` before each; inputs warm in the page
# cache; medians. zero_to_fp32 writes the weights only (a third of what
# consolidate writes: it leaves out the optimizer state) and runs once.
#
# WARM=1 (the default) touches 4 GiB of memory before each command. On a VM
# that hands freed memory back to its host (virtio-balloon free page
# reporting, in 2 MiB blocks: /sys/module/page_reporting), the previous run's
# freed output comes back on first touch one host fault at a time, and
# whichever command next fills the page cache with large folios pays for it
# (cp -r of 2.3 GiB: 0.7 s or 2-7 s at random). Touching memory first gives
# every command the memory a machine without reporting has. WARM=0 leaves it.
set -euo pipefail
bin=$(readlink -f "$1") data=$(readlink -f "$2") git_dir=$3 stage=$4 runs=${5:-3} warm=${WARM:-1}
repo=$(cd "$(dirname "$0")/.." && pwd)
root=${OPTSTATE_TORCH26_ROOT:-/var/cache/optstate-torch26}
ds=/var/tmp/deepspeed-0.16.4
mkdir -p "$data"
if [ ! -d "$root$ds/deepspeed" ]; then
  "$repo/testdata/gen/torch26-chroot.sh"
  mkdir -p "$root$ds"
  git --git-dir="$git_dir" archive v0.16.4 deepspeed op_builder accelerator version.txt | tar -x -C "$root$ds"
fi
in="$data/zero$stage/global_step1"
if [ ! -d "$in" ]; then
  cp "$repo/bench/make_big_zero.py" "$data/"
  "$repo/testdata/gen/torch26-python.sh" -C "$data" make_big_zero.py "$ds" "zero$stage" "$stage" > "$data/make.log" 2>&1
fi
bytes=$(du -sb "$in" | cut -f1)
cat "$in"/* > /dev/null
. "$(dirname "$0")/measure.sh"
after_measure() { rm -rf "$data/out" "$data/out.pt"; }
before_measure() { if [ "$warm" = 1 ]; then python3 -c "bytearray(b'\x01') * (4 << 30)"; fi; }
for _ in $(seq "$runs"); do
  measure "cp -r" cp -r "$in" "$data/out"
  measure "cp -r && sync" sh -c "cp -r '$in' '$data/out' && sync"
  measure "optstate consolidate --to index" "$bin" consolidate -q --to index "$in" -o "$data/out.pt"
  measure "optstate consolidate --to index --no-sync" "$bin" consolidate -q --no-sync --to index "$in" -o "$data/out.pt"
  measure "optstate validate (layout + every value)" "$bin" validate "$in"
  measure "optstate inspect" "$bin" inspect "$in"
done
measure "DeepSpeed 0.16.4 zero_to_fp32 (weights only)" "$repo/testdata/gen/torch26-python.sh" -C "$data" -c \
  "import sys, warnings; warnings.filterwarnings('ignore'); sys.path.insert(0, '$ds')
from deepspeed.utils.zero_to_fp32 import convert_zero_checkpoint_to_fp32_state_dict
convert_zero_checkpoint_to_fp32_state_dict('zero$stage', 'out', max_shard_size=None)"
echo "input: $in (ZeRO-$stage, 2 ranks), $((bytes / 1048576)) MiB in $(ls "$in" | wc -l) files; runs: $runs (median), zero_to_fp32 once; $(nproc) cores; WARM=$warm"
echo
print_table every
