"""Real HeavyBall 0.24.4 optimizers under real FSDP2 (torch 2.6, CPU, gloo, 2 ranks).

Source: github.com/HomebrewML/HeavyBall at commit 0ad271b (release 0.24.4; the
repository has no tags before v1.0.0). HeavyBall is not vendored: heavyball-fixtures.sh
extracts it outside the repository and puts it on PYTHONPATH.

Usage (inside the torch 2.6 chroot; see heavyball-fixtures.sh):
  python3 testdata/gen/gen_heavyball_fsdp2.py HEAVYBALL_SRC OUTDIR
Writes, for CASE in adamw_foreach, adamw_perparam (foreach=False) and soap (foreach=False;
0.24.4's SOAP with foreach=True fails under merged keys: its update loop reuses the last
parameter's state, `'list' object has no attribute 'lerp_'`):
  OUTDIR/CASE/rank{0,1}.optim.pt        torch.save(opt.state_dict()) on each rank: keys
                                        (0, global shape), values DTensor shards
  OUTDIR/CASE/rank{0,1}.model.pt        torch.save(model.state_dict()): DTensor shards
  OUTDIR/CASE/rank{0,1}.optim.local.pt  the same with every DTensor replaced by
  OUTDIR/CASE/rank{0,1}.model.local.pt  .to_local(), as users do to avoid DTensor pickles
  OUTDIR/CASE/truth.json                what the generator saw while training: each
                                        parameter's name, global and local shapes, the
                                        state key HeavyBall used for it, how many
                                        parameters shared that key, and sha256 of every
                                        local shard (model and state) per rank
HeavyBall 0.24.4 keys state by (param.data_ptr(), tuple(param.shape)); a DTensor's
data_ptr() is 0 and its shape is global, so same-shape parameters share one entry.

What it takes on CPU, all local to this script: the FSDP2 shims of gen_dcp_fsdp2.py
(USE_LIBUV=0, mp.spawn, CPU stream events, gloo's reduce_scatter AVG), compilation off
(heavyball.utils.compile_mode = None), torch's pointwise sharding strategy registered
for aten.clamp_.Tensor / aten.clamp.Tensor (AdamW's denominator clamp), and SOAP run
under implicit_replication() (it mixes DTensors with plain tensors).
"""
import hashlib
import json
import os
import sys
import warnings

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_dcp_fsdp2 import free_port, patch_cpu_gloo  # noqa: E402

warnings.filterwarnings("ignore")
WORLD = 2
STEPS = 3
CASES = ("adamw_foreach", "adamw_perparam", "soap")


class Net(nn.Module):
    """13 parameters: six of shape [64], three [64, 64], four of a shape of their own."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(96, 64)
        self.fc1 = nn.Linear(64, 64)
        self.fc2 = nn.Linear(64, 64)
        self.fc3 = nn.Linear(64, 64)
        self.norm = nn.LayerNorm(64)
        self.up = nn.Linear(64, 128)
        self.down = nn.Linear(128, 64)

    def blocks(self):
        return (self.emb, self.fc1, self.fc2, self.fc3, self.norm, self.up, self.down)

    def forward(self, idx):
        h = self.emb(idx)
        h = torch.relu(self.fc1(h))
        h = torch.relu(self.fc2(h))
        h = self.norm(self.fc3(h))
        return self.down(torch.relu(self.up(h)))


class ConvNet(nn.Module):
    """SOAP's case: the conv weight [64, 3, 3, 3] is merged to a [64, 27] view."""

    def __init__(self, classes):
        super().__init__()
        self.conv = nn.Conv2d(3, 64, 3)
        self.fc1 = nn.Linear(64, 64)
        self.fc2 = nn.Linear(64, 64)
        self.head = nn.Linear(64, classes)

    def blocks(self):
        return (self.conv, self.fc1, self.fc2, self.head)

    def forward(self, x):
        h = torch.relu(self.conv(x)).mean(dim=(2, 3))
        h = torch.relu(self.fc1(h))
        return self.head(torch.relu(self.fc2(h)))


def register_clamp_strategy():
    from torch.distributed.tensor._ops._pointwise_ops import pointwise_strategy
    from torch.distributed.tensor._ops.utils import register_op_strategy
    aten = torch.ops.aten
    register_op_strategy([aten.clamp_.Tensor, aten.clamp.Tensor])(pointwise_strategy)


def make(case):
    import heavyball
    torch.manual_seed(0)
    if case == "soap":
        model = ConvNet(10)
        return model, lambda params: heavyball.ForeachSOAP(params, lr=1e-3, warmup_steps=1, foreach=False)
    model = Net()
    foreach = case == "adamw_foreach"
    return model, lambda params: heavyball.ForeachAdamW(params, lr=1e-2, foreach=foreach)


def batches(case):
    g = torch.Generator().manual_seed(7)  # every rank sees the same batches
    for _ in range(STEPS):
        if case.startswith("soap"):
            yield torch.randn(4, 3, 8, 8, generator=g), torch.randn(4, 10 if case == "soap" else 64, generator=g)
        else:
            yield torch.randint(0, 96, (4, 5), generator=g), torch.randn(4, 5, 64, generator=g)


def sha(t):
    t = t.detach().contiguous().cpu()
    return hashlib.sha256(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"").hexdigest()


def local(obj):
    from torch.distributed.tensor import DTensor
    if isinstance(obj, DTensor):
        return obj.to_local()
    if isinstance(obj, dict):
        return {k: local(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [local(v) for v in obj]
    return obj


def worker(rank, port, out):
    import heavyball.utils
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.experimental import implicit_replication

    heavyball.utils.compile_mode = None
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    patch_cpu_gloo()
    register_clamp_strategy()
    mesh = init_device_mesh("cpu", (WORLD,))
    for case in CASES:
        model, make_opt = make(case)
        for block in model.blocks():
            fully_shard(block, mesh=mesh, reshard_after_forward=False)
        fully_shard(model, mesh=mesh, reshard_after_forward=False)
        opt = make_opt(model.parameters())
        initial = {n: p.to_local().detach().clone() for n, p in model.named_parameters()}
        for x, y in batches(case):
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            if case.startswith("soap"):
                with implicit_replication():
                    opt.step()
            else:
                opt.step()
            opt.zero_grad()
        d = os.path.join(out, case)
        os.makedirs(d, exist_ok=True)
        osd, msd = opt.state_dict(), model.state_dict()
        torch.save(osd, os.path.join(d, f"rank{rank}.optim.pt"))
        torch.save(msd, os.path.join(d, f"rank{rank}.model.pt"))
        torch.save(local(osd), os.path.join(d, f"rank{rank}.optim.local.pt"))
        torch.save(local(msd), os.path.join(d, f"rank{rank}.model.local.pt"))
        truth = truth_of(case, model, opt, osd, rank, initial)
        with open(os.path.join(d, f"truth.rank{rank}.json"), "w") as f:
            json.dump(truth, f, indent=1, sort_keys=True)
        dist.barrier()
    dist.destroy_process_group()


def describe_value(v):
    if hasattr(v, "to_local"):
        return {"dtensor": True, "global_shape": list(v.shape), "local_shape": list(v.to_local().shape),
                "sha256": sha(v.to_local())}
    if isinstance(v, torch.Tensor):
        return {"shape": list(v.shape), "sha256": sha(v)}
    if isinstance(v, (list, tuple)):
        return [describe_value(x) for x in v]
    return v


def truth_of(case, model, opt, osd, rank, initial):
    """Recorded from the live optimizer: the key HeavyBall computes for each parameter."""
    import heavyball.utils as hu
    params = []
    group = opt.param_groups[0]
    names = {id(p): n for n, p in model.named_parameters()}
    for p in group["params"]:
        views = hu.merge_group(group, p) if case.startswith("soap") else [p]
        if isinstance(views, torch.Tensor):
            views = [views]
        keys = [[int(v.data_ptr()), list(v.shape)] for v in views]
        params.append({"name": names[id(p)], "global_shape": list(p.shape),
                       "local_shape": list(p.to_local().shape), "placements": [str(x) for x in p.placements],
                       "keys": keys, "sha256": sha(p.to_local()),
                       # HeavyBall's fake group for a shared key holds only its first
                       # parameter: the others never move on this rank.
                       "moved": not torch.equal(initial[names[id(p)]], p.to_local())})
    sharers = {}
    for p in params:
        for k in p["keys"]:
            sharers.setdefault(json.dumps(k), []).append(p["name"])
    state = []
    for k, entry in osd["state"].items():
        key = [int(k[0]), list(k[1])]
        state.append({"key": key, "params": sharers.get(json.dumps(key), []),
                      "fields": {f: describe_value(v) for f, v in sorted(entry.items())}})
    return {"heavyball": "0.24.4 (HomebrewML/HeavyBall 0ad271b)", "torch": torch.__version__.split("+")[0],
            "case": case, "rank": rank, "world": WORLD, "steps": STEPS, "params": params, "state": state,
            "param_groups_k": [g.get("k") for g in osd["param_groups"]]}


def spawn_ranks(worker, world):
    """What the HeavyBall generators' main() does: HeavyBall's source (argv[1])
    put on sys.path for the spawned workers to inherit, OUTDIR (argv[2]) made,
    and `world` processes of worker(rank, port, OUTDIR) run; returns OUTDIR."""
    import torch.multiprocessing as mp
    sys.path.insert(0, sys.argv[1])
    out = os.path.abspath(sys.argv[2])
    os.makedirs(out, exist_ok=True)
    mp.spawn(worker, args=(free_port(), out), nprocs=world, join=True)
    return out


def main():
    out = spawn_ranks(worker, WORLD)
    for case in CASES:
        print(case, sorted(os.listdir(os.path.join(out, case))))


if __name__ == "__main__":
    main()
