"""optstate on real HeavyBall 0.24.4 + FSDP2 + TP rank files (4 ranks, 2 x 2 mesh), checked by torch 2.6.

Usage (torch 2.6): check_heavyball_tp.py SRC SCRATCH
  SRC      testdata/heavyball/fsdp2_tp_0.24.4 (rank<N>.{optim,model}.pt, truth.rank<N>.json)
  SCRATCH  what check_heavyball_fsdp2.sh wrote: tp.unsharded/{optim,model}.pt (unshard of
           the rank files as saved), tp.fqn/rank<N>.optim.pt (remap --to fqn of the rank
           set), tp.fixed.{optim,model}.pt (that remap and the model unsharded), and
           tp.dcp_optim/, tp.dcp_model/: export --world-size 4 of the two rank sets.
1. Every unsharded tensor equals the whole tensor the generator gathered with full_tensor()
   while training (sha256 in the truth), for parameters and every state field.
2. The remapped rank files load with weights_only=True once _StridedShard is allowlisted
   (as the files as saved do, and only then); each keeps its rank's DTensor
   shards bit for bit, placements and mesh coordinate included, under FQN keys.
3. dcp.load + set_{model,optimizer}_state_dict put the export into a fresh FSDP2 + TP model
   on a 2 x 2 mesh (gloo, mp.spawn): every tensor gathered equals the unsharded file's.
"""
import hashlib
import json
import os
import socket
import sys
import warnings

import torch
import torch.distributed.tensor  # noqa: F401

warnings.filterwarnings("ignore")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "testdata", "gen"))


def fail(msg):
    print("FAIL", msg)
    sys.exit(1)


def sha(t):
    t = t.detach().contiguous()
    return hashlib.sha256(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"").hexdigest()


def check_whole(src, scratch):
    truth = json.load(open(os.path.join(src, "truth.rank0.json")))
    model = torch.load(os.path.join(scratch, "tp.unsharded", "model.pt"), weights_only=True)
    optim = torch.load(os.path.join(scratch, "tp.unsharded", "optim.pt"), weights_only=True)
    n = 0
    for p in truth["params"]:
        if sha(model[p["name"]]) != p["full_sha256"]:
            fail(f"unsharded model {p['name']}: not the tensor full_tensor() gave")
        n += 1
    by_key = {(k[0], tuple(k[1])): v for k, v in optim["state"].items()}
    for s in truth["state"]:
        entry = by_key[(s["key"][0], tuple(s["key"][1]))]
        for field, want in s["fields"].items():
            if list(entry[field].shape) != want["global_shape"] or sha(entry[field]) != want["full_sha256"]:
                fail(f"unsharded state {s['key']}.{field}: not the tensor full_tensor() gave")
            n += 1
    print(f"ok: {n} tensors unsharded from 4 ranks on a 2 x 2 mesh equal full_tensor()'s, bit for bit")


def load_strided(path):
    """torch 2.6's `import torch.distributed.tensor` allowlists DTensor, Shard, Replicate and
    Partial but not _StridedShard: FSDP2 + TP files (as saved, and so remapped) need it added."""
    from torch.distributed.tensor.placement_types import _StridedShard
    try:
        torch.load(path, weights_only=True)
        fail(f"{path}: loaded with weights_only=True without _StridedShard allowlisted")
    except Exception as e:  # noqa: BLE001
        if "_StridedShard" not in str(e):
            fail(f"{path}: {e}")
    with torch.serialization.safe_globals([_StridedShard]):
        return torch.load(path, weights_only=True)


def check_remapped(src, scratch):
    load_strided(os.path.join(src, "rank0.optim.pt"))  # the input as saved: the same
    for r in range(4):
        truth = json.load(open(os.path.join(src, f"truth.rank{r}.json")))
        osd = load_strided(os.path.join(scratch, "tp.fqn", f"rank{r}.optim.pt"))
        names = [p["name"] for p in truth["params"]]
        if sorted(osd["state"]) != sorted(names):
            fail(f"rank {r}: remapped keys {sorted(osd['state'])}")
        for p, s in zip(truth["params"], truth["state"]):
            for field, want in s["fields"].items():
                t = osd["state"][p["name"]][field]
                if sha(t.to_local()) != want["sha256"] or [repr(x) for x in t.placements] != p["placements"] or \
                        list(t.device_mesh.get_coordinate()) != p["coordinate"]:
                    fail(f"rank {r}: {p['name']}.{field} is not the rank's shard as saved")
    print("ok: the remapped rank files load with weights_only=True (+ _StridedShard), every shard bit for bit at its coordinate")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load_worker(rank, port, scratch):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    from dcp_load_check import load_and_compare
    from gen_dcp_fsdp2 import patch_cpu_gloo
    from gen_heavyball_fsdp2_tp import MESH, Net

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=4)
    patch_cpu_gloo()
    mesh = init_device_mesh("cpu", MESH, mesh_dim_names=("dp", "tp"))
    torch.manual_seed(123)  # other values than the checkpoint's: loading must replace them
    model = Net()
    parallelize_module(model.tp, mesh["tp"], {"in_proj": ColwiseParallel(), "out_proj": RowwiseParallel()})
    for block in (model.emb, model.tp, model.head):
        fully_shard(block, mesh=mesh["dp"], reshard_after_forward=False)
    fully_shard(model, mesh=mesh["dp"], reshard_after_forward=False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    load_and_compare(model, opt, scratch, "tp.", "FSDP2 + TP 2 x 2")
    dist.barrier()
    dist.destroy_process_group()


def main():
    import torch.multiprocessing as mp
    src, scratch = sys.argv[1], sys.argv[2]
    check_whole(src, scratch)
    check_remapped(src, scratch)
    mp.spawn(load_worker, args=(free_port(), os.path.abspath(scratch)), nprocs=4, join=True)
    print("ok: the exported DCP checkpoint loads into FSDP2 + TP (2 x 2) + AdamW, every tensor equal")


if __name__ == "__main__":
    main()
