#!/bin/bash
# optstate unshard of a >= 2 GiB FSDP2 rank set (2 rank files of DTensor shards),
# against cp of the same files. Prints a Markdown table for BENCHMARKS.md.
#
# Usage: bench/unshard_bench.sh OPTSTATE_BINARY DATADIR [RUNS=3] [TENSORS=16]
# DATADIR gets rank0.pt and rank1.pt the first time, written by torch 2.6 (the
# chroot) on 2 gloo ranks: TENSORS DTensors of [8192, 4096] float32 (128 MiB
# whole each) placed Shard(0), plus one [4096, 8192] placed Shard(1), which
# unshard must assemble in memory (its 128 MiB is the expected memory bound).
# Runs alternate, `sync` before each; inputs warm in the page cache; medians.
# optstate fsyncs its output, cp does not: the `cp && sync` and --no-sync rows
# compare like with like.
set -euo pipefail
bin=$(readlink -f "$1") data=$(readlink -f "$2") runs=${3:-3} tensors=${4:-16}
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$data"
if [ ! -f "$data/rank1.pt" ]; then
  # mp.spawn pickles the worker by name: it must live in a file, not in -c.
  cat > "$data/make_rank_set.py" <<'PY'
import os, socket, sys, warnings
import torch, torch.multiprocessing as mp
warnings.filterwarnings("ignore")
def worker(rank, port, n):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard
    os.environ["MASTER_ADDR"] = "127.0.0.1"; os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    mesh = init_device_mesh("cpu", (2,))
    g = torch.Generator().manual_seed(rank)
    sd = {f"layers.{i}.weight": DTensor.from_local(torch.randn(4096, 4096, generator=g), mesh, [Shard(0)],
                                                   run_check=False) for i in range(n)}
    sd["head.weight"] = DTensor.from_local(torch.randn(4096, 4096, generator=g), mesh, [Shard(1)], run_check=False)
    torch.save(sd, f"rank{rank}.pt")
    dist.barrier(); dist.destroy_process_group()
if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(port, int(sys.argv[1])), nprocs=2, join=True)
PY
  "$repo/testdata/gen/torch26-python.sh" -C "$data" make_rank_set.py "$tensors"
fi
bytes=$(( $(stat -c %s "$data/rank0.pt") + $(stat -c %s "$data/rank1.pt") ))
cat "$data/rank0.pt" "$data/rank1.pt" > /dev/null
. "$(dirname "$0")/measure.sh"
after_measure() { rm -rf "$data/out.pt" "$data/out"; }
for _ in $(seq "$runs"); do
  measure "cp rank0.pt rank1.pt" sh -c "mkdir '$data/out' && cp '$data/rank0.pt' '$data/rank1.pt' '$data/out/'"
  measure "cp && sync" sh -c "mkdir '$data/out' && cp '$data/rank0.pt' '$data/rank1.pt' '$data/out/' && sync"
  measure "optstate unshard" "$bin" unshard -q "$data/rank0.pt" "$data/rank1.pt" -o "$data/out.pt"
  measure "optstate unshard --no-sync" "$bin" unshard -q --no-sync "$data/rank0.pt" "$data/rank1.pt" -o "$data/out.pt"
done
echo "input: 2 rank files, $((bytes / 1048576)) MiB, $((tensors + 1)) DTensors (one Shard(1) of 128 MiB); runs: $runs (median); $(nproc) cores"
echo
print_table
