"""Real HeavyBall 0.24.4 optimizers under real FSDP1 (torch 2.6, CPU, gloo, 2 ranks).

Source: github.com/HomebrewML/HeavyBall at commit 0ad271b (release 0.24.4). HeavyBall is not
vendored: heavyball-fixtures.sh extracts it outside the repository and puts it on PYTHONPATH.

Usage (inside the torch 2.6 chroot; see heavyball-fixtures.sh):
  python3 testdata/gen/gen_heavyball_fsdp1.py HEAVYBALL_SRC OUTDIR
gen_heavyball_fsdp2.py's 13-parameter Net, FullyShardedDataParallel around each block and the
root (device_id cpu, as FSDP1 asks on CPU), ForeachAdamW (foreach=True), 3 steps on batches every
rank shares, for CASE in
  orig   use_orig_params=True: the optimizer holds each parameter's 1-D piece on this rank (empty
         where the rank holds none of it), and HeavyBall keys each by (data_ptr, local shape)
  flat   use_orig_params=False: the optimizer holds each unit's flat parameter piece
Writes per rank OUTDIR/CASE/rank<r>.pt = {"model": LOCAL_STATE_DICT, "optimizer":
opt.state_dict()}, rank<r>.sharded.pt = {"model", "optimizer"} under SHARDED_STATE_DICT with
FSDP.optim_state_dict (FSDP1's recommended save, given HeavyBall's keys), rank0.full.pt = the same under
FULL_STATE_DICT (rank0_only=False, what FSDP1 runs on CPU; rank 0 keeps it), and truth.rank<r>.json: every parameter's name, local shape and key as the live
optimizer computed it, which parameters shared each key, and whether the parameter moved.
"""
import hashlib
import json
import os
import sys
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_heavyball_fsdp2 import Net, batches, spawn_ranks  # noqa: E402

warnings.filterwarnings("ignore")
WORLD = 2
STEPS = 3
CASES = {"orig": True, "flat": False}


def sha(t):
    t = t.detach().contiguous().cpu()
    return hashlib.sha256(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"").hexdigest()


def worker(rank, port, out):
    import heavyball
    import heavyball.utils
    import torch.distributed as dist
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import (FullOptimStateDictConfig, FullStateDictConfig, ShardedOptimStateDictConfig,
                                        ShardedStateDictConfig, StateDictType)

    heavyball.utils.compile_mode = None
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), USE_LIBUV="0")
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.set_num_threads(1)
    for case, orig in CASES.items():
        torch.manual_seed(0)
        net = Net()
        names_of = {}
        for block in net.blocks():
            for n, p in block.named_parameters():
                names_of[id(p)] = n
        kwargs = {"use_orig_params": orig, "device_id": torch.device("cpu")}
        blocks = [FSDP(b, **kwargs) for b in net.blocks()]
        for attr, wrapped in zip(("emb", "fc1", "fc2", "fc3", "norm", "up", "down"), blocks):
            setattr(net, attr, wrapped)
        model = FSDP(net, **kwargs)
        opt = heavyball.ForeachAdamW(model.parameters(), lr=1e-2, foreach=True)
        named = dict(model.named_parameters())
        initial = {n: p.detach().clone() for n, p in named.items()}
        for x, y in batches("adamw"):
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
        d = os.path.join(out, case)
        os.makedirs(d, exist_ok=True)
        with FSDP.state_dict_type(model, StateDictType.LOCAL_STATE_DICT):
            msd = model.state_dict()
        torch.save({"model": msd, "optimizer": opt.state_dict()}, os.path.join(d, f"rank{rank}.pt"))
        params = []
        for n, p in named.items():
            params.append({"name": n, "local_shape": list(p.shape), "key": [int(p.data_ptr()), list(p.shape)],
                           "moved": not torch.equal(initial[n], p.detach()), "sha256": sha(p)})
        sharers = {}
        for p in params:
            sharers.setdefault(json.dumps(p["key"]), []).append(p["name"])
        state = [{"key": [int(k[0]), list(k[1])], "params": sharers.get(json.dumps([int(k[0]), list(k[1])]), [])}
                 for k in opt.state_dict()["state"]]
        try:
            with FSDP.state_dict_type(model, StateDictType.SHARDED_STATE_DICT, ShardedStateDictConfig(),
                                      ShardedOptimStateDictConfig()):
                sharded_state = {"model": model.state_dict(), "optimizer": FSDP.optim_state_dict(model, opt)}
            torch.save(sharded_state, os.path.join(d, f"rank{rank}.sharded.pt"))
            sharded = "returned: saved as rank<r>.sharded.pt"
        except Exception as e:  # noqa: BLE001 - what FSDP does with HeavyBall's keys is the record
            sharded = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300] if str(e).strip() else ''}"
        try:  # every rank gathers; rank 0 keeps the file (rank0_only=False: what FSDP1 runs on CPU)
            with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, FullStateDictConfig(rank0_only=False),
                                      FullOptimStateDictConfig(rank0_only=False)):
                full_state = {"model": model.state_dict(), "optimizer": FSDP.optim_state_dict(model, opt)}
            if rank == 0:
                torch.save(full_state, os.path.join(d, "rank0.full.pt"))
            full = "returned: rank 0 saved it as rank0.full.pt"
        except Exception as e:  # noqa: BLE001
            full = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300] if str(e).strip() else ''}"
        truth = {"heavyball": "0.24.4 (HomebrewML/HeavyBall 0ad271b)", "torch": torch.__version__.split("+")[0],
                 "case": case, "use_orig_params": orig, "rank": rank, "world": WORLD, "steps": STEPS,
                 "params": params, "state": state, "fsdp_optim_state_dict_sharded": sharded,
                 "fsdp_optim_state_dict_full": full}
        with open(os.path.join(d, f"truth.rank{rank}.json"), "w") as f:
            json.dump(truth, f, indent=1, sort_keys=True)
        dist.barrier()
    dist.destroy_process_group()


def main():
    out = spawn_ranks(worker, WORLD)
    for case in CASES:
        print(case, sorted(os.listdir(os.path.join(out, case))))


if __name__ == "__main__":
    main()
