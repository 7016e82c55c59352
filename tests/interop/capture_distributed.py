"""optstate.capture inside real torch.distributed jobs (torch 2.6, CPU, gloo,
2 processes by mp.spawn): a DDP-wrapped model, an FSDP2 (fully_shard) one and
FSDP1 ones (use_orig_params True and False, fc its own unit), each with AdamW.
Every rank writes its manifest with write_manifest(...,
"OUT/<mode>.rank{rank}.json"), and for DDP one for the job ("OUT/ddp.job.json",
written by rank 0 alone); the parent then checks each against what torch
itself says of the parameters: names, global shapes, rank and world size, and
for FSDP2 each rank's piece as torch.chunk cuts dim 0 (local_shape,
local_offset, placements), data_ptr 0 and the piece's bytes. For FSDP1 each
rank checks every piece the manifest places (flat_offset, views) against the
whole parameters FSDP1 gathers (summon_full_params): the elements must be
those.

After one step every sharded mode's state is also saved as HeavyBall
0.12-0.24 keyed it, by (data_ptr, shape) of what the optimizer held
(OUT/<mode>.rank{rank}.pt), with the truth of which parameters shared each key
(OUT/keys.<mode>.<rank>.json), for optstate collisions --manifest to match, and
as torch.optim keyed it (OUT/<mode>.rank{rank}.index.pt), which optstate remap
--manifest must give back.

Usage (torch 2.6): python3 capture_distributed.py CAPTURE_PY OUTDIR
"""
import importlib.util
import json
import math
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
        self.fc2 = nn.Linear(4, 4)       # fc's shapes again: one pointer key under FSDP2
        self.gate = nn.Linear(4, 1)      # 1 row: rank 1's piece is empty

    def forward(self, x):
        return self.gate(self.fc2(self.fc(self.emb(x))))


def step(model, optimizer):
    model(torch.tensor([0, 1, 2, 3, 4])).square().sum().backward()
    optimizer.step()


def save_pointer_keyed(model, optimizer, capture, path, truth_path):
    """optimizer's state keyed by (data_ptr, shape) as HeavyBall 0.12-0.24 kept
    it, and which parameters shared each key."""
    saved = optimizer.state_dict()
    names = capture._names(model)
    held = [p for group in optimizer.param_groups for p in group["params"]]
    keyed, sharers = {}, {}
    for index, p in enumerate(held):
        if index not in saved["state"]:
            continue
        key = (int(p.data_ptr()), tuple(int(d) for d in p.shape))
        keyed[key] = saved["state"][index]  # one entry a key: a later parameter's state overwrites
        sharers.setdefault(key, []).append(capture._clean(names[id(p)]))
    torch.save({"state": keyed, "param_groups": saved["param_groups"]}, path)
    torch.save(saved, path.replace(".pt", ".index.pt"))  # as torch.optim keys it
    with open(truth_path, "w") as f:
        json.dump([{"key": [k[0], list(k[1])], "params": v} for k, v in sharers.items()], f)


def check_fsdp1_pieces(model, doc, fsdp):
    """Every piece the manifest places holds those elements of the whole
    parameter, as FSDP1 gathers it."""
    local = {p["name"]: held.detach().clone() for p, held in zip(doc["params"], held_params(model, doc))}
    checked = 0
    with fsdp.summon_full_params(model, writeback=False):
        whole = {name.replace("_fsdp_wrapped_module.", ""): p.detach().flatten()
                 for name, p in model.named_parameters()}
        for p in doc["params"]:
            pieces = p.get("views") or ([dict(p, offset=0, numel=local[p["name"]].numel())]
                                        if "flat_offset" in p else [])
            for v in pieces:
                want = whole[v["name"]][v["flat_offset"]:v["flat_offset"] + v["numel"]]
                assert torch.equal(local[p["name"]][v["offset"]:v["offset"] + v["numel"]], want), (p, v)
                assert list(whole[v["name"]].shape) == [math.prod(v.get("global_shape", v["shape"]))], v
                checked += 1
    return checked


def held_params(model, doc):
    by_name = {}
    for name, p in model.named_parameters():
        by_name[name.replace("_fsdp_wrapped_module.", "")] = p
    return [by_name[p["name"]] for p in doc["params"]]


def run(rank, port, capture_py, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    capture = load_capture(capture_py)
    torch.manual_seed(0)
    ddp = nn.parallel.DistributedDataParallel(Net())
    capture.write_manifest(ddp, torch.optim.AdamW(ddp.parameters()), os.path.join(out, "ddp.rank{rank}.json"))
    # One file for the job: rank 0's; every rank gets its path back.
    job = capture.write_manifest(ddp, torch.optim.AdamW(ddp.parameters()), os.path.join(out, "ddp.job.json"))
    assert job == os.path.join(out, "ddp.job.json"), job
    from torch.distributed.fsdp import fully_shard
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../testdata/gen"))
    from gen_dcp_fsdp2 import patch_cpu_gloo  # FSDP2's forward and backward on CPU need these
    patch_cpu_gloo()
    torch.manual_seed(0)
    model = Net()
    fully_shard(model.fc, reshard_after_forward=False)
    fully_shard(model, reshard_after_forward=False)
    opt = torch.optim.AdamW(model.parameters())
    capture.write_manifest(model, opt, os.path.join(out, "fsdp2.rank{rank}.json"))
    step(model, opt)
    save_pointer_keyed(model, opt, capture, os.path.join(out, f"fsdp2.rank{rank}.pt"),
                       os.path.join(out, f"keys.fsdp2.{rank}.json"))
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    checked = 0
    for mode, orig in (("fsdp1_orig", True), ("fsdp1_flat", False)):
        torch.manual_seed(0)
        net = Net()
        net.fc = FSDP(net.fc, use_orig_params=orig, device_id=torch.device("cpu"))
        model = FSDP(net, use_orig_params=orig, device_id=torch.device("cpu"))
        opt = torch.optim.AdamW(model.parameters())
        written = capture.write_manifest(model, opt, os.path.join(out, mode + ".rank{rank}.json"))
        checked += check_fsdp1_pieces(model, json.load(open(written)), FSDP)
        step(model, opt)
        save_pointer_keyed(model, opt, capture, os.path.join(out, f"{mode}.rank{rank}.pt"),
                           os.path.join(out, f"keys.{mode}.{rank}.json"))
    print(f"rank {rank}: {checked} FSDP1 pieces hold the elements of the whole parameters FSDP1 gathers")
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
    job = json.load(open(os.path.join(out, "ddp.job.json")))
    assert (job["rank"], job["world_size"]) == (0, WORLD), job
    assert [p["name"] for p in job["params"]] == ["module." + n for n in shapes], job
    held = {"fsdp1_orig": {}, "fsdp1_flat": {}}  # elements of each parameter held, over the ranks
    for rank in range(WORLD):
        orig = json.load(open(os.path.join(out, f"fsdp1_orig.rank{rank}.json")))
        assert (orig["rank"], orig["world_size"]) == (rank, WORLD), orig
        assert sorted(p["name"] for p in orig["params"]) == sorted(shapes), orig
        for p in orig["params"]:
            assert p["global_shape"] == shapes[p["name"]] and len(p["shape"]) == 1, p
            assert ("flat_offset" in p) == (p["shape"][0] > 0), p
            held["fsdp1_orig"][p["name"]] = held["fsdp1_orig"].get(p["name"], 0) + p["shape"][0]
        flat = json.load(open(os.path.join(out, f"fsdp1_flat.rank{rank}.json")))
        assert sorted(p["name"] for p in flat["params"]) == ["_flat_param", "fc._flat_param"], flat
        for p in flat["params"]:
            assert p["flat_offset"] == rank * p["shape"][0], p
            for v in p["views"]:
                assert v["shape"] == shapes[v["name"]], v
                held["fsdp1_flat"][v["name"]] = held["fsdp1_flat"].get(v["name"], 0) + v["numel"]
    for mode, counts in held.items():
        assert counts == {n: math.prod(s) for n, s in shapes.items()}, (mode, counts)
    print(f"ok: capture under DDP, FSDP2 and FSDP1 on {WORLD} ranks: names, global and local shapes, offsets, "
          "placements, rank and world size as torch has them; FSDP1's pieces hold every element once")


if __name__ == "__main__":
    main()
