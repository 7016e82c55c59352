"""Distributed optimizer files: FSDP1 rank files every way torch 2.6 lets a rank save them, and
ZeroRedundancyOptimizer's consolidated state over DDP.

Usage (torch 2.6, root chroot): python3 testdata/gen/gen_distributed_corpus.py OUTDIR
2 ranks by torch.multiprocessing.spawn (torchrun needs libuv), gloo, CPU (device_id cpu, as FSDP1
asks there), a small MLP (Linear 6->8, LayerNorm 8, Linear 8->3) trained 3 seeded AdamW steps, for
use_orig_params False and True, with and without a 1-D device mesh, and both again on 4 ranks (flat4,
orig4: the last Linear's 3 rows leave rank 3 no block of its weight and bias). Each rank saves:
  <case>_plain_rank<r>.pt    {"model": LOCAL_STATE_DICT, "optimizer": optim.state_dict()} -
                             the rank's own pieces (1-D, of the flat parameter or of each parameter)
  <case>_sharded_rank<r>.pt  {"model", "optimizer"} under SHARDED_STATE_DICT (FSDP.optim_state_dict):
                             ShardedTensors keyed by FQN, FSDP1's sharded default in torch 2.6
  <case>_full.pt             rank 0's {"model", "optimizer"} under FULL_STATE_DICT (rank0_only=False,
                             no offload: what FSDP1 runs on CPU), keyed by FQN: a rank set of one file;
                             where torch saved two state fields as one tensor (use_orig_params=True
                             on CPU: exp_avg is exp_avg_sq) a fault case that validate must catch
What torch refuses is recorded under "skipped" with its error. zero_redundancy_rank0.pt: the same MLP under DDP with
torch.distributed.optim.ZeroRedundancyOptimizer(AdamW), consolidate_state_dict(to=0), saved by rank 0
with the DDP model's state_dict (module. names). <file>.expected.json (describe.py, made inside the rank
so ShardedTensors load) beside each; corpus.json as gen_enumerated_corpus.py writes it.
fsdp1_truth.pt: the same MLP and batches trained in one plain process, saved as FULL_STATE_DICT would
hold it ({"model": state_dict, "optimizer": {"state": {fqn: ...}, "param_groups": [{"params": [fqn...]}]}}).
Every rank sees the same batches, so the ranks' averaged gradient is the one process's: the sharded
saves, made whole, must equal this file bit for bit. Each case names its "rank_set" and that "truth".
FSDP2 (fully_shard on each Linear and the root, the shims of gen_dcp_fsdp2.py) under every policy it
offers on CPU: fsdp2_plain (1-D mesh), fsdp2_mixed (MixedPrecisionPolicy, bf16 parameters, fp32
reduction), fsdp2_offload (CPUOffloadPolicy, pin_memory off: no CUDA), fsdp2_hsdp (4 ranks, mesh
(2, 2): replicate x shard). Each rank saves {"model": model.state_dict(), "optimizer":
opt.state_dict()} (DTensors, index keys); <case>_truth.pt is the same dict with every DTensor
replaced by its full_tensor(), gathered in the run. What torch refuses on CPU is recorded as skipped.
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
# (name, use_orig_params, device mesh, world size): at 4 ranks the last Linear's 3 rows leave rank 3
# without a block of its weight and bias, which FSDP1 saves as a ShardedTensor with no local shard.
CASES = [("flat", False, False, 2), ("orig", True, False, 2), ("flat_mesh", False, True, 2),
         ("orig_mesh", True, True, 2), ("flat4", False, False, 4), ("orig4", True, False, 4)]


def net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.Linear(8, 3))


def train(model, opt):
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        x, y = torch.randn(4, 6, generator=g), torch.randn(4, 3, generator=g)
        opt.zero_grad()
        # .float(): under a bf16 MixedPrecisionPolicy the output is bf16 (a no-op otherwise)
        nn.functional.mse_loss(model(x).float(), y).backward()
        opt.step()


def save_truth(out):
    """The run every FSDP1 case shards, in one process, keyed by FQN as FULL_STATE_DICT keys it."""
    torch.set_num_threads(1)
    model = net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    train(model, opt)
    names = [n for n, _ in model.named_parameters()]
    sd = opt.state_dict()
    optim = {"state": {names[i]: v for i, v in sd["state"].items()},
             "param_groups": [dict(g, params=[names[i] for i in g["params"]]) for g in sd["param_groups"]]}
    torch.save({"model": model.state_dict(), "optimizer": optim}, os.path.join(out, "fsdp1_truth.pt"))


def params_of(model, opt):
    names = {id(p): n for n, p in model.named_parameters()}
    return [{"name": names.get(id(p), "?"), "shape": list(p.shape), "dtype": str(p.dtype).replace("torch.", ""),
             "group": gi, "has_state": len(opt.state.get(p, {})) > 0}
            for gi, g in enumerate(opt.param_groups) for p in g["params"]]


def aliased_fields(state):
    """Entries whose tensor fields are views of the same bytes, as "key: a and b". torch 2.6 on CPU
    gathers FSDP1's FULL_STATE_DICT of use_orig_params=True parameters that way (exp_avg is
    exp_avg_sq): recorded from the saved object, so the corpus says what torch did."""
    found = []
    for key, entry in state.items():
        seen = {}
        for name, v in entry.items():
            if not isinstance(v, torch.Tensor) or v.dim() == 0:
                continue
            where = (v.untyped_storage().data_ptr(), v.storage_offset())
            if where in seen:
                found.append(f"{key}: {seen[where]} and {name}")
            seen.setdefault(where, name)
    return found


def run(rank, out, case, orig, mesh, world, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), USE_LIBUV="0")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    kwargs = {"use_orig_params": orig, "device_id": torch.device("cpu")}
    if mesh:
        from torch.distributed.device_mesh import init_device_mesh
        kwargs["device_mesh"] = init_device_mesh("cpu", (world,))
    model = FSDP(net(), **kwargs)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    train(model, opt)
    cases, skipped = [], []

    def save(name, state, layout):
        path = os.path.join(out, f"{name}_rank{rank}.pt")
        torch.save(state, path)
        describe.write_expected(path, f"FSDP1 {layout}, rank {rank} of {world}")
        cases.append({"case": f"{name}_rank{rank}", "file": os.path.basename(path), "kind": "fsdp1",
                      "class": "torch.optim.AdamW", "variant": "default", "kwargs": {"lr": 1e-2},
                      "param_groups": 1, "sparse_gradients": False, "params": params_of(model, opt),
                      "fsdp1": {"use_orig_params": orig, "device_mesh": mesh, "layout": layout, "rank": rank,
                                "world": world}, "rank_set": name, "truth": "fsdp1_truth.pt", "healthy": True})

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
    def full():
        # Every rank gathers (collectives); rank 0 keeps the file, as a training script does.
        # rank0_only=False and no CPU offload: the combination FSDP1 runs on CPU (see main's skipped).
        with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, FullStateDictConfig(rank0_only=False),
                                  FullOptimStateDictConfig(rank0_only=False)):
            return {"model": model.state_dict(), "optimizer": FSDP.optim_state_dict(model, opt)}
    attempt(f"{case}_plain", "LOCAL_STATE_DICT model, optim.state_dict()", local)
    attempt(f"{case}_sharded", "SHARDED_STATE_DICT, FSDP.optim_state_dict", sharded)
    try:
        state = full()
        if rank == 0:
            path = os.path.join(out, f"{case}_full.pt")
            torch.save(state, path)
            describe.write_expected(path, f"FSDP1 FULL_STATE_DICT, gathered by rank 0 of {world}")
            c = {"case": f"{case}_full", "file": os.path.basename(path), "kind": "fsdp1",
                 "class": "torch.optim.AdamW", "variant": "default", "kwargs": {"lr": 1e-2},
                 "param_groups": 1, "sparse_gradients": False, "params": params_of(model, opt),
                 "fsdp1": {"use_orig_params": orig, "device_mesh": mesh,
                           "layout": "FULL_STATE_DICT, FSDP.optim_state_dict", "rank": 0, "world": world}}
            aliased = aliased_fields(state["optimizer"]["state"])
            if aliased:  # what torch itself saved is broken: judged as a fault, not as a set against the truth
                c.update(healthy=False, expect_rule="state-tensors-alias",
                         torch_fault=f"torch saved {aliased[0]} as one tensor ({len(aliased)} entries)")
            else:
                c.update(rank_set=f"{case}_full", truth="fsdp1_truth.pt", healthy=True)
            cases.append(c)
    except Exception as e:  # noqa: BLE001 - torch's refusal is recorded, never hidden
        text = f"{type(e).__name__}: {e}".strip().splitlines()
        skipped.append({"case": f"{case}_full", "tries": [{"error": (text[0] if text else "")[:300]}]})
    dist.barrier()
    with open(os.path.join(out, f".{case}.rank{rank}.json"), "w") as f:
        json.dump({"cases": cases, "skipped": skipped}, f)
    dist.destroy_process_group()


FSDP2_CASES = {"fsdp2_plain": {}, "fsdp2_mixed": {"mixed": True}, "fsdp2_offload": {"offload": True},
               "fsdp2_hsdp": {"world": 4, "mesh": (2, 2)}}


def run_fsdp2(rank, out, case, port):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard
    from torch.distributed.tensor import DTensor
    from gen_dcp_fsdp2 import patch_cpu_gloo
    opts = FSDP2_CASES[case]
    world = opts.get("world", WORLD)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), USE_LIBUV="0")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    patch_cpu_gloo()
    gloo_all_reduce = dist.all_reduce

    def all_reduce(tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
        # HSDP averages over the replicate dim with ReduceOp.AVG, which gloo refuses: SUM, then divide.
        if op != dist.ReduceOp.AVG:
            return gloo_all_reduce(tensor, op=op, group=group, async_op=async_op)
        gloo_all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
        tensor.div_(dist.get_world_size(group))
        return None
    dist.all_reduce = all_reduce
    cases, skipped = [], []
    try:
        shape = opts.get("mesh", (world,))
        mesh = init_device_mesh("cpu", shape, mesh_dim_names=("replicate", "shard")[-len(shape):])
        kwargs = {"mesh": mesh, "reshard_after_forward": False}
        if opts.get("mixed"):
            kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        if opts.get("offload"):
            kwargs["offload_policy"] = CPUOffloadPolicy(pin_memory=False)
        model = net()
        for sub in model:
            if isinstance(sub, nn.Linear):
                fully_shard(sub, **kwargs)
        fully_shard(model, **kwargs)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        train(model, opt)
        state = {"model": model.state_dict(), "optimizer": opt.state_dict()}

        def whole(v):
            if isinstance(v, DTensor):
                return v.full_tensor()
            if isinstance(v, dict):
                return type(v)((k, whole(x)) for k, x in v.items())
            if isinstance(v, list):
                return [whole(x) for x in v]
            return v
        truth = whole(state)  # every rank takes part in the gathers
        path = os.path.join(out, f"{case}_rank{rank}.pt")
        torch.save(state, path)
        describe.write_expected(path, f"FSDP2 {case}, rank {rank} of {world}")
        if rank == 0:
            torch.save(truth, os.path.join(out, f"{case}_truth.pt"))
        cases.append({"case": f"{case}_rank{rank}", "file": os.path.basename(path), "kind": "fsdp2",
                      "class": "torch.optim.AdamW", "variant": "default", "kwargs": {"lr": 1e-2},
                      "param_groups": 1, "sparse_gradients": False, "params": params_of(model, opt),
                      "fsdp2": {"policy": case, "mesh": list(opts.get("mesh", (world,))), "rank": rank,
                                "world": world},
                      "rank_set": case, "truth": f"{case}_truth.pt", "healthy": True})
    except Exception as e:  # noqa: BLE001 - torch's refusal is recorded, never hidden
        text = f"{type(e).__name__}: {e}".strip().splitlines()
        skipped.append({"case": f"{case}_rank{rank}", "tries": [{"error": (text[0] if text else "")[:300]}]})
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
    save_truth(out)
    all_cases, skipped = [], []

    def collect(case, world):  # what each rank wrote of its cases and of torch's refusals
        for r in range(world):
            part = os.path.join(out, f".{case}.rank{r}.json")
            with open(part) as f:
                doc = json.load(f)
            os.remove(part)
            all_cases.extend(doc["cases"])
            skipped.extend(doc["skipped"])
    for i, (case, orig, mesh, world) in enumerate(CASES):
        mp.spawn(run, args=(out, case, orig, mesh, world, 29640 + i), nprocs=world)
        collect(case, world)
    for i, case in enumerate(FSDP2_CASES):
        world = FSDP2_CASES[case].get("world", WORLD)
        mp.spawn(run_fsdp2, args=(out, case, 29660 + i), nprocs=world)
        collect(case, world)
    mp.spawn(run_zero_redundancy, args=(out, 29650), nprocs=WORLD)
    part = os.path.join(out, ".zero_redundancy.rank0.json")
    with open(part) as f:
        all_cases += json.load(f)["cases"]
    os.remove(part)
    # FULL_STATE_DICT with rank0_only=True and offload_to_cpu=True (the configuration FSDP's docs show)
    # takes a CPU process down: not attempted here, where it would end the whole run. Tried in a
    # separate probe on this torch: use_orig_params=True segfaults; False raises "setStorage: ...
    # out of bounds for storage of size 0" on rank 0 and KeyError 'state' on rank 1.
    skipped.append({"case": "full_rank0_only_offload", "tries": [{"error": "not attempted: FULL_STATE_DICT with "
                    "rank0_only=True, offload_to_cpu=True segfaults (use_orig_params=True) or raises (False) "
                    "under FSDP1 on CPU in torch 2.6; get_state_dict(full_state_dict=True) segfaults too "
                    "(shared/tools/torch26 trap 6)"}]})
    all_cases.sort(key=lambda c: c["case"])
    with open(os.path.join(out, "corpus.json"), "w") as f:
        json.dump({"torch": torch.__version__.split("+")[0], "generator": "testdata/gen/gen_distributed_corpus.py",
                   "cases": all_cases, "skipped": skipped}, f, indent=1)
        f.write("\n")
    print(f"{len(all_cases)} cases in {out}")


if __name__ == "__main__":
    main()
