#!/bin/bash
# consolidate of a DCP checkpoint by one process against --distributed with P
# processes on this machine (RANK/WORLD_SIZE/MASTER_ADDR set by hand, rank 0
# serving the store), and a --distributed job that writes almost nothing (the
# repository's 11 KiB fixture): what any --distributed run costs to start.
# Runs alternate, `sync` before each, input warm; medians. Prints a Markdown
# table for BENCHMARKS.md.
#
# Usage: bench/consolidate_distributed_bench.sh OPTSTATE_BINARY DATADIR [RUNS=5] [PROCESSES=2]
# DATADIR/dcp is made the first time: a 512 MiB synthetic AdamW checkpoint with
# its model (regenerate), exported to 4 ranks (1.5 GiB).
set -euo pipefail
bin=$(readlink -f "$1") data=$(readlink -f "$2") runs=${3:-5} procs=${4:-2}
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$data/one" "$data/many"
if [ ! -d "$data/dcp" ]; then
  "$bin" regenerate -q --synthetic 512MiB --steps 1 --with-model --no-sync -o "$data/src.pt" > /dev/null
  "$bin" export "$data/src.pt" -o "$data/dcp" --world-size 4 -q > /dev/null
  rm "$data/src.pt"
fi
cat "$data/dcp"/* > /dev/null
port=$((29000 + $$ % 1000))
# together PORT INPUT OUTPUT FLAGS...: the job of $procs processes.
together() {
  local port=$1 in=$2 out=$3
  shift 3
  local pids=()
  for r in $(seq 0 $((procs - 1))); do
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=$r WORLD_SIZE=$procs \
      "$bin" consolidate --distributed "$in" -o "$out" -q "$@" > /dev/null &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
}
export -f together
export bin procs
. "$(dirname "$0")/measure.sh"
after_measure() { rm -f "$data/one/"*.pt "$data/many/"*.pt; }
small=$repo/testdata/good/torch26/fsdp2_dcp
for _ in $(seq "$runs"); do
  measure "consolidate, 1 process" "$bin" consolidate -q "$data/dcp" -o "$data/one/out.pt"
  measure "consolidate --distributed, $procs processes" bash -c "together $((port += 1)) '$data/dcp' '$data/many/out.pt'"
  measure "consolidate --no-sync, 1 process" "$bin" consolidate -q --no-sync "$data/dcp" -o "$data/one/out.pt"
  measure "consolidate --distributed --no-sync, $procs processes" \
    bash -c "together $((port += 1)) '$data/dcp' '$data/many/out.pt' --no-sync"
  measure "consolidate --distributed of an 11 KiB fixture, $procs processes" \
    bash -c "together $((port += 1)) '$small' '$data/many/small.pt' --no-sync"
done
echo "input: $data/dcp, $(( $(du -sb "$data/dcp" | cut -f1) >> 20 )) MiB; runs: $runs (median), alternating; $(nproc) cores"
echo
print_table every
