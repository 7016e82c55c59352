"""The outputs oracle for rank files, run by torch 2.6 in a process group of the saving world.

Usage: python3 rank_outputs.py RESULT_JSON WORLD ORIGINAL REPACKED [ORIGINAL REPACKED ...]
  (one pair per rank, in rank order; paths relative to the repository)
FSDP1's ShardedTensors load only in a process group of the world size that saved them, and
FSDP2's DTensors need their mesh: each of WORLD processes (gloo, torch.multiprocessing.spawn)
loads its rank's original and what optstate wrote of it with weights_only=False, and compares
them: ShardedTensors by global size, every local shard's offsets and bits; DTensors by global
shape, placements and local bits; everything else as same_tree compares it. RESULT_JSON gets
{"<repacked>": "" or the first difference}.
"""
import json
import os
import socket
import sys
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from same_tree import bits, same  # noqa: E402

warnings.filterwarnings("ignore")


def plain(obj):
    """ShardedTensors and DTensors as comparable tuples of what they are."""
    name = type(obj).__name__
    if name == "ShardedTensor":
        return ("ShardedTensor", tuple(obj.size()),
                tuple((tuple(s.metadata.shard_offsets), bits(s.tensor)) for s in obj.local_shards()))
    if isinstance(obj, torch.Tensor) and hasattr(obj, "placements"):
        return ("DTensor", tuple(obj.shape), tuple(repr(p) for p in obj.placements), bits(obj.to_local()))
    if isinstance(obj, dict):
        return type(obj)((k, plain(v)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(plain(v) for v in obj)
    return obj


def worker(rank, world, port, pairs, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), USE_LIBUV="0")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    original, written = pairs[rank]
    try:
        a = plain(torch.load(original, weights_only=False))
        b = plain(torch.load(written, weights_only=False))
        diff = same(a, b)
        if not diff:  # same() skips what it met before; the tuples above hold every bit
            diff = "" if repr(a) == repr(b) else "a tensor differs"
    except Exception as e:  # noqa: BLE001 - the difference is the finding
        diff = f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:200] if str(e).strip() else ''}"
    with open(f"{out}.rank{rank}", "w") as f:
        json.dump({written: diff}, f)
    dist.barrier()
    dist.destroy_process_group()


def main():
    out, world = sys.argv[1], int(sys.argv[2])
    files = sys.argv[3:]
    pairs = [(files[i], files[i + 1]) for i in range(0, len(files), 2)]
    if len(pairs) != world:
        sys.exit(f"rank_outputs: {len(pairs)} pairs for a world of {world}")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(world, port, pairs, out), nprocs=world)
    result = {}
    for r in range(world):
        with open(f"{out}.rank{r}") as f:
            result.update(json.load(f))
        os.remove(f"{out}.rank{r}")
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
