"""Real HeavyBall 0.24.4 AdamW under real FSDP2 + tensor parallelism (torch 2.6, CPU,
gloo, 4 ranks on a 2 x 2 ("dp", "tp") mesh).

Source: github.com/HomebrewML/HeavyBall at commit 0ad271b (release 0.24.4), extracted
outside the repository by heavyball-fixtures.sh and put on PYTHONPATH.

Usage (inside the torch 2.6 chroot):
  python3 testdata/gen/gen_heavyball_fsdp2_tp.py HEAVYBALL_SRC OUTDIR
Writes OUTDIR/rank{0..3}.{optim,model}.pt (torch.save of each rank's state dicts) and
OUTDIR/truth.rank<N>.json (schemas/heavyball-run-truth.schema.json, plus each shard's
global offset as torch's compute_local_shape_and_global_offset gives it).

The layouts this makes are the ones FSDP2 + TP gives (torch 2.6):
  tp.in_proj   ColwiseParallel then fully_shard: placements (_StridedShard(dim=0, sf=2),
               Shard(dim=0)) on the 2-D mesh: TP's chunk first, FSDP's chunk of it second
  tp.out_proj  RowwiseParallel then fully_shard: weight (Shard(dim=0), Shard(dim=1)),
               bias (Shard(dim=0), Replicate())
  emb, head    fully_shard only: a 1-D DTensor on the "dp" sub-mesh (Shard(dim=0)), so the
               two tp ranks of one dp coordinate hold the same shard; emb has 9 rows (5 + 4)
Each rank's DeviceMesh pickles its own `_coordinate_on_dim`; the files say which block
they hold. Shims as gen_heavyball_fsdp2.py (CPU gloo, compile off, clamp strategy).
"""
import hashlib
import json
import os
import sys
import warnings

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_dcp_fsdp2 import patch_cpu_gloo  # noqa: E402
from gen_heavyball_fsdp2 import register_clamp_strategy, sha, spawn_ranks  # noqa: E402

warnings.filterwarnings("ignore")
WORLD = 4
MESH = (2, 2)
STEPS = 3


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.in_proj = nn.Linear(32, 48)
        self.out_proj = nn.Linear(48, 32)

    def forward(self, h):
        return self.out_proj(torch.relu(self.in_proj(h)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(9, 32)
        self.tp = Mlp()
        self.head = nn.Linear(32, 6)

    def forward(self, idx):
        return self.head(self.tp(self.emb(idx)))


def worker(rank, port, out):
    import heavyball
    import heavyball.utils
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    heavyball.utils.compile_mode = None
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    patch_cpu_gloo()
    register_clamp_strategy()
    mesh = init_device_mesh("cpu", MESH, mesh_dim_names=("dp", "tp"))
    torch.manual_seed(0)
    model = Net()
    parallelize_module(model.tp, mesh["tp"], {"in_proj": ColwiseParallel(), "out_proj": RowwiseParallel()})
    for block in (model.emb, model.tp, model.head):
        fully_shard(block, mesh=mesh["dp"], reshard_after_forward=False)
    fully_shard(model, mesh=mesh["dp"], reshard_after_forward=False)
    opt = heavyball.ForeachAdamW(model.parameters(), lr=1e-2, foreach=False)
    g = torch.Generator().manual_seed(7)
    for _ in range(STEPS):
        x, y = torch.randint(0, 9, (4, 5), generator=g), torch.randn(4, 5, 6, generator=g)
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
        opt.zero_grad()
    osd, msd = opt.state_dict(), model.state_dict()
    torch.save(osd, os.path.join(out, f"rank{rank}.optim.pt"))
    torch.save(msd, os.path.join(out, f"rank{rank}.model.pt"))
    params = []
    for name, p in model.named_parameters():
        shape, offset = compute_local_shape_and_global_offset(p.shape, p.device_mesh, p.placements)
        params.append({"name": name, "global_shape": list(p.shape), "local_shape": list(p.to_local().shape),
                       "placements": [repr(x) for x in p.placements], "mesh_shape": list(p.device_mesh.shape),
                       "coordinate": list(p.device_mesh.get_coordinate()), "torch_global_offset": list(offset),
                       "keys": [[int(p.data_ptr()), list(p.shape)]], "sha256": sha(p.to_local()),
                       "full_sha256": sha(p.full_tensor())})
    truth = {"heavyball": "0.24.4 (HomebrewML/HeavyBall 0ad271b)", "torch": torch.__version__.split("+")[0],
             "case": "adamw_perparam_fsdp2_tp", "rank": rank, "world": WORLD, "steps": STEPS,
             "mesh": list(MESH), "params": params,
             "state": [{"key": [int(k[0]), list(k[1])],
                        "fields": {f: {"global_shape": list(v.shape), "local_shape": list(v.to_local().shape),
                                       "sha256": sha(v.to_local()), "full_sha256": sha(v.full_tensor())}
                                   for f, v in sorted(e.items()) if hasattr(v, "to_local")}}
                       for k, e in osd["state"].items()]}
    with open(os.path.join(out, f"truth.rank{rank}.json"), "w") as f:
        json.dump(truth, f, indent=1, sort_keys=True)
    dist.barrier()
    dist.destroy_process_group()


def main():
    print(sorted(os.listdir(spawn_ranks(worker, WORLD))))


if __name__ == "__main__":
    main()
