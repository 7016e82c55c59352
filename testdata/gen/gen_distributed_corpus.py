"""Distributed optimizer files: FSDP1 rank files every way torch 2.6 lets a rank save them, and
ZeroRedundancyOptimizer's consolidated state over DDP.

Usage (torch 2.6, root chroot): python3 testdata/gen/gen_distributed_corpus.py OUTDIR
2 ranks by torch.multiprocessing.spawn (torchrun needs libuv), gloo, CPU (device_id cpu, as FSDP1
asks there), a small MLP (Linear 6->8, LayerNorm 8, Linear 8->3) trained 3 seeded AdamW steps, for
use_orig_params False and True, with and without a 1-D device mesh. Each rank saves:
  <case>_plain_rank<r>.pt    {"model": LOCAL_STATE_DICT, "optimizer": optim.state_dict()} -
                             the rank's own pieces (1-D, of the flat parameter or of each parameter)
  <case>_sharded_rank<r>.pt  {"model", "optimizer"} under SHARDED_STATE_DICT (FSDP.optim_state_dict):
                             ShardedTensors keyed by FQN, FSDP1's sharded default in torch 2.6
and under FULL_STATE_DICT (rank0_only) what rank 0 gathers, when this torch can on CPU (recorded
under "skipped" with its error otherwise). zero_redundancy_rank0.pt: the same MLP under DDP with
torch.distributed.optim.ZeroRedundancyOptimizer(AdamW), consolidate_state_dict(to=0), saved by rank 0
with the DDP model's state_dict (module. names). <file>.expected.json (describe.py, made inside the rank
so ShardedTensors load) beside each; corpus.json as gen_enumerated_corpus.py writes it.
"""
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import (FullOptimStateDictConfig, FullStateDictConfig, ShardedOptimStateDictConfig,
                                    ShardedStateDictConfig, StateDictType)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import describe  # noqa: E402

WORLD = 2
CASES = [("flat", False, False), ("orig", True, False), ("flat_mesh", False, True), ("orig_mesh", True, True)]


def net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.Linear(8, 3))


def params_of(model, opt):
    names = {id(p): n for n, p in model.named_parameters()}
    return [{"name": names.get(id(p), "?"), "shape": list(p.shape), "dtype": str(p.dtype).replace("torch.", ""),
             "group": gi, "has_state": len(opt.state.get(p, {})) > 0}
            for gi, g in enumerate(opt.param_groups) for p in g["params"]]


def run(rank, out, case, orig, mesh, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), USE_LIBUV="0")
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.set_num_threads(1)
    kwargs = {"use_orig_params": orig, "device_id": torch.device("cpu")}
    if mesh:
        from torch.distributed.device_mesh import init_device_mesh
        kwargs["device_mesh"] = init_device_mesh("cpu", (WORLD,))
    model = FSDP(net(), **kwargs)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        x, y = torch.randn(4, 6, generator=g), torch.randn(4, 3, generator=g)
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    cases, skipped = [], []

    def save(name, state, layout):
        path = os.path.join(out, f"{name}_rank{rank}.pt")
        torch.save(state, path)
        describe.write_expected(path, f"FSDP1 {layout}, rank {rank} of {WORLD}")
        cases.append({"case": f"{name}_rank{rank}", "file": os.path.basename(path), "kind": "fsdp1",
                      "class": "torch.optim.AdamW", "variant": "default", "kwargs": {"lr": 1e-2},
                      "param_groups": 1, "sparse_gradients": False, "params": params_of(model, opt),
                      "fsdp1": {"use_orig_params": orig, "device_mesh": mesh, "layout": layout, "rank": rank,
                                "world": WORLD}, "healthy": True})

    def attempt(name, layout, make):
        try:
            save(name, make(), layout)
        except Exception as e:  # noqa: BLE001 - torch's refusal is recorded, never hidden
            text = f"{type(e).__name__}: {e}".strip().splitlines()
            skipped.append({"case": f"{name}_rank{rank}", "tries": [{"error": (text[0] if text else "")[:300]}]})

    def local():
        with FSDP.state_dict_type(model, StateDictType.LOCAL_STATE_DICT):
            return {"model": model.state_dict(), "optimizer": opt.state_dict()}

    def sharded():
        with FSDP.state_dict_type(model, StateDictType.SHARDED_STATE_DICT, ShardedStateDictConfig(),
                                  ShardedOptimStateDictConfig()):
            return {"model": model.state_dict(), "optimizer": FSDP.optim_state_dict(model, opt)}
    attempt(f"{case}_plain", "LOCAL_STATE_DICT model, optim.state_dict()", local)
    attempt(f"{case}_sharded", "SHARDED_STATE_DICT, FSDP.optim_state_dict", sharded)
    dist.barrier()
    with open(os.path.join(out, f".{case}.rank{rank}.json"), "w") as f:
        json.dump({"cases": cases, "skipped": skipped}, f)
    dist.destroy_process_group()


def run_zero_redundancy(rank, out, port):
    from torch.distributed.optim import ZeroRedundancyOptimizer
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), USE_LIBUV="0")
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.set_num_threads(1)
    model = nn.parallel.DistributedDataParallel(net())
    opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-2)
    g = torch.Generator().manual_seed(1 + rank)  # each rank its own batches, as data parallelism has them
    for _ in range(3):
        x, y = torch.randn(4, 6, generator=g), torch.randn(4, 3, generator=g)
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    opt.consolidate_state_dict(to=0)
    cases = []
    if rank == 0:
        path = os.path.join(out, "zero_redundancy_rank0.pt")
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, path)
        describe.write_expected(path, "ZeroRedundancyOptimizer(AdamW) under DDP, consolidated on rank 0")
        cases.append({"case": "zero_redundancy_rank0", "file": "zero_redundancy_rank0.pt", "kind": "zero_redundancy",
                      "class": "torch.optim.AdamW", "variant": "default", "kwargs": {"lr": 1e-2}, "param_groups": 1,
                      "sparse_gradients": False, "params": params_of(model, opt.optim), "healthy": True})
        with open(os.path.join(out, ".zero_redundancy.rank0.json"), "w") as f:
            json.dump({"cases": cases, "skipped": []}, f)
    dist.barrier()
    dist.destroy_process_group()


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    all_cases, skipped = [], []
    for i, (case, orig, mesh) in enumerate(CASES):
        mp.spawn(run, args=(out, case, orig, mesh, 29640 + i), nprocs=WORLD)
        for r in range(WORLD):
            part = os.path.join(out, f".{case}.rank{r}.json")
            with open(part) as f:
                doc = json.load(f)
            os.remove(part)
            all_cases += doc["cases"]
            skipped += doc["skipped"]
    mp.spawn(run_zero_redundancy, args=(out, 29650), nprocs=WORLD)
    part = os.path.join(out, ".zero_redundancy.rank0.json")
    with open(part) as f:
        all_cases += json.load(f)["cases"]
    os.remove(part)
    # FULL_STATE_DICT gathers through collectives FSDP1 runs on CUDA; tried in its own processes,
    # since on CPU it may take the process down.
    skipped.append({"case": "full_state_dict", "tries": [{"error": "not attempted: get_state_dict(full_state_dict="
                                                          "True) segfaults under FSDP1 on CPU in torch 2.6 "
                                                          "(shared/tools/torch26 trap 6)"}]})
    all_cases.sort(key=lambda c: c["case"])
    with open(os.path.join(out, "corpus.json"), "w") as f:
        json.dump({"torch": torch.__version__.split("+")[0], "generator": "testdata/gen/gen_distributed_corpus.py",
                   "cases": all_cases, "skipped": skipped}, f, indent=1)
        f.write("\n")
    print(f"{len(all_cases)} cases in {out}")


if __name__ == "__main__":
    main()
