"""optstate.capture inside real HeavyBall runs: a check run by hand (HeavyBall's
source cannot be fetched in CI), its figures in docs/python.md.

Source: github.com/HomebrewML/HeavyBall at commit 0ad271b (release 0.24.4), extracted
outside this repository as heavyball-fixtures.sh does. gen_heavyball_fsdp2.py's Net,
ForeachAdamW (foreach=True, lr 1e-2), 3 steps on 2 gloo ranks under FSDP1
(use_orig_params on and off, a unit per block) and FSDP2; each rank writes
python/optstate/capture.py's manifest (OUTDIR/<mode>.rank<r>.json) and HeavyBall's
state dict (OUTDIR/<mode>.rank<r>.pt). Then, on the host:
  optstate collisions --manifest OUTDIR/<mode>.rank<r>.json OUTDIR/<mode>.rank<r>.pt
  optstate migrate --manifest ... -o migrated.pt

Usage (torch 2.6 chroot): python3 testdata/gen/check_heavyball_capture.py HEAVYBALL_SRC OUTDIR
"""
import os
import sys
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "../../python/optstate"))
warnings.filterwarnings("ignore")
from gen_dcp_fsdp2 import free_port, patch_cpu_gloo  # noqa: E402
from gen_heavyball_fsdp2 import Net, batches, register_clamp_strategy  # noqa: E402
import capture  # noqa: E402

def worker(rank, port, out):
    import heavyball
    import heavyball.utils
    heavyball.utils.compile_mode = None
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), USE_LIBUV="0")
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.set_num_threads(1)
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, fully_shard
    patch_cpu_gloo()
    register_clamp_strategy()
    for mode in ("fsdp1_orig", "fsdp1_flat", "fsdp2"):
        torch.manual_seed(0)
        net = Net()
        if mode == "fsdp2":
            for b in net.blocks():
                fully_shard(b, reshard_after_forward=False)
            model = fully_shard(net, reshard_after_forward=False)
        else:
            kw = {"use_orig_params": mode == "fsdp1_orig", "device_id": torch.device("cpu")}
            for attr, b in zip(("emb", "fc1", "fc2", "fc3", "norm", "up", "down"), [FSDP(b, **kw) for b in net.blocks()]):
                setattr(net, attr, b)
            model = FSDP(net, **kw)
        opt = heavyball.ForeachAdamW(model.parameters(), lr=1e-2, foreach=True)
        capture.write_manifest(model, opt, os.path.join(out, mode + ".rank{rank}.json"))
        for x, y in batches("adamw"):
            ((model(x) - y) ** 2).mean().backward()
            opt.step()
            opt.zero_grad()
        torch.save(opt.state_dict(), os.path.join(out, f"{mode}.rank{rank}.pt"))
        dist.barrier()
    dist.destroy_process_group()

if __name__ == "__main__":
    sys.path.insert(0, sys.argv[1])
    out = os.path.abspath(sys.argv[2])
    os.makedirs(out, exist_ok=True)
    mp.spawn(worker, args=(free_port(), out), nprocs=2, join=True)
    print("wrote", sorted(os.listdir(out)))
