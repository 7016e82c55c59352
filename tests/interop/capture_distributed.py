"""optstate.capture inside real torch.distributed jobs (torch 2.6, CPU, gloo,
2 processes by mp.spawn): a DDP-wrapped model and an FSDP2 (fully_shard) one,
each with AdamW. Every rank writes its manifest with write_manifest(...,
"OUT/<mode>.rank{rank}.json"); the parent then checks each against what torch
itself says of the parameters: names, global shapes, rank and world size, and
for FSDP2 each rank's piece as torch.chunk cuts dim 0 (local_shape,
local_offset, placements), data_ptr 0 and the piece's bytes.

Usage (torch 2.6): python3 capture_distributed.py CAPTURE_PY OUTDIR
"""
import importlib.util
import json
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

WORLD = 2


def load_capture(path):
    spec = importlib.util.spec_from_file_location("optstate_capture", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(5, 4)    # 5 rows: 3 + 2 over 2 ranks
        self.fc = nn.Linear(4, 4)
        self.gate = nn.Linear(4, 1)      # 1 row: rank 1's piece is empty


def run(rank, port, capture_py, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    capture = load_capture(capture_py)
    torch.manual_seed(0)
    ddp = nn.parallel.DistributedDataParallel(Net())
    capture.write_manifest(ddp, torch.optim.AdamW(ddp.parameters()), os.path.join(out, "ddp.rank{rank}.json"))
    from torch.distributed.fsdp import fully_shard
    torch.manual_seed(0)
    model = Net()
    fully_shard(model)
    capture.write_manifest(model, torch.optim.AdamW(model.parameters()), os.path.join(out, "fsdp2.rank{rank}.json"))
    dist.barrier()
    dist.destroy_process_group()


def main():
    capture_py, out = sys.argv[1], sys.argv[2]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(run, args=(port, capture_py, out), nprocs=WORLD, join=True)
    shapes = {name: list(p.shape) for name, p in Net().named_parameters()}
    for rank in range(WORLD):
        ddp = json.load(open(os.path.join(out, f"ddp.rank{rank}.json")))
        assert (ddp["rank"], ddp["world_size"]) == (rank, WORLD), ddp
        assert [(p["name"], p["shape"]) for p in ddp["params"]] == [("module." + n, s) for n, s in shapes.items()]
        assert all("local_shape" not in p and p["data_ptr"] != 0 for p in ddp["params"]), ddp
        fsdp = json.load(open(os.path.join(out, f"fsdp2.rank{rank}.json")))
        assert (fsdp["rank"], fsdp["world_size"]) == (rank, WORLD), fsdp
        assert [p["name"] for p in fsdp["params"]] == list(shapes)
        for p in fsdp["params"]:
            rows = shapes[p["name"]][0]
            chunk = -(-rows // WORLD)  # torch.chunk: ceil(rows / world) rows a rank, the last ones short or empty
            start = min(rows, rank * chunk)
            want_rows = min(rows, start + chunk) - start
            assert p["shape"] == shapes[p["name"]], p
            assert p["local_shape"] == [want_rows] + shapes[p["name"]][1:], p
            assert p["placements"] == ["Shard(dim=0)"], p
            assert p["data_ptr"] == 0, p
            numel = want_rows
            for d in shapes[p["name"]][1:]:
                numel *= d
            assert p["nbytes"] == 4 * numel, p
            if want_rows:  # torch gives an empty piece no meaningful offset
                assert p["local_offset"] == [start] + [0] * (len(shapes[p["name"]]) - 1), p
    print(f"ok: capture under DDP and FSDP2 on {WORLD} ranks: names, global and local shapes, offsets, "
          "placements, rank and world size as torch has them")


if __name__ == "__main__":
    main()
