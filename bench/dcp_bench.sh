#!/bin/bash
# optstate consolidate and reshard of a >= 3 GiB DCP checkpoint, against cp -r of
# the same directory and torch 2.6's dcp_to_torch_save. Prints a Markdown table
# for BENCHMARKS.md.
#
# Usage: bench/dcp_bench.sh OPTSTATE_BINARY DATADIR [RUNS=3]
# DATADIR gets src.pt (optstate regenerate: a model of 1.1 GiB of float32
# parameters with AdamW state, FQN keys, 3.2 GiB) and dcp4/ (optstate export of
# it on 4 ranks, every tensor split on dim 0 as FSDP2 does) the first time.
# Runs alternate between the commands, with `sync` before each so no command pays
# for another's write-back; inputs are in the page cache (warm); medians.
# optstate fsyncs its outputs, cp does not: `cp -r && sync` and --no-sync rows
# compare like with like.
set -euo pipefail
bin=$(readlink -f "$1") data=$(readlink -f "$2") runs=${3:-3}
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$data"
if [ ! -d "$data/dcp4" ]; then
  "$bin" regenerate --synthetic 1100MiB --key-scheme fqn --with-model --no-sync -q -o "$data/src.pt" > /dev/null
  "$bin" export "$data/src.pt" -o "$data/dcp4" --world-size 4 --no-sync -q > /dev/null
fi
in="$data/dcp4"
bytes=$(du -sb "$in" | cut -f1)
cat "$in"/* "$in"/.metadata > /dev/null
. "$(dirname "$0")/measure.sh"
after_measure() { rm -rf "$data/out" "$data/out.pt"; }
for _ in $(seq "$runs"); do
  measure "cp -r" cp -r "$in" "$data/out"
  measure "cp -r && sync" sh -c "cp -r '$in' '$data/out' && sync"
  measure "optstate consolidate" "$bin" consolidate -q "$in" -o "$data/out.pt"
  measure "optstate consolidate --no-sync" "$bin" consolidate -q --no-sync "$in" -o "$data/out.pt"
  measure "optstate reshard 4 -> 3" "$bin" reshard -q "$in" -o "$data/out" --world-size 3
  measure "optstate reshard 4 -> 3 --no-sync" "$bin" reshard -q --no-sync "$in" -o "$data/out" --world-size 3
done
if [ -x /var/cache/optstate-torch26/usr/bin/python3 ] || [ -n "${OPTSTATE_TORCH26_PYTHON:-}" ]; then
  measure "torch 2.6 dcp_to_torch_save" "$repo/testdata/gen/torch26-python.sh" -C "$data" -c \
    'import sys, warnings; warnings.filterwarnings("ignore")
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
dcp_to_torch_save("dcp4", "out.pt")'
fi
echo "input: $in, $((bytes / 1048576)) MiB in $(ls "$in" | wc -l) data files; runs: $runs (median), torch once; $(nproc) cores"
echo
print_table
