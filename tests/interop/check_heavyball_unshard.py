"""optstate unshard + export of real HeavyBall 0.24.4 + FSDP2 rank files, checked by torch 2.6.

Usage (torch 2.6): check_heavyball_unshard.py SRC SCRATCH
  SRC      testdata/heavyball/fsdp2_0.24.4
  SCRATCH  what check_heavyball_fsdp2.sh wrote: per case <case>.unsharded/{optim,model}.pt
           (unshard of the rank files as saved), and for adamw_foreach fixed.{optim,model}.pt
           (remap --to fqn --on-collision reset of the rank set, then unshard) exported to
           dcp_optim/ and dcp_model/ with export --world-size 2.
1. Every DTensor of every rank file, stacked along its Shard dim in rank order, equals the
   unsharded file's tensor at the same path, bit for bit; shapes are global.
2. dcp.load + set_model_state_dict / set_optimizer_state_dict put the exported checkpoint
   into a fresh FSDP2 model with torch.optim.AdamW at world sizes 1, 2 and 3 (gloo,
   mp.spawn): every parameter and every exp_avg/exp_avg_sq, gathered with full_tensor(),
   equals the unsharded file's.
"""
import os
import socket
import sys
import warnings

import torch
import torch.distributed.tensor  # noqa: F401
from torch.distributed.tensor import DTensor

warnings.filterwarnings("ignore")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "testdata", "gen"))


def fail(msg):
    print("FAIL", msg)
    sys.exit(1)


def walk(obj, path=""):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from walk(v, f"{path}.{k}" if path else str(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from walk(v, f"{path}.{i}" if path else str(i))
    elif isinstance(obj, torch.Tensor):
        yield path, obj


def check_stacked(src, scratch):
    n = 0
    for case in ("adamw_foreach", "adamw_perparam", "soap"):
        for what in ("optim", "model"):
            ranks = [torch.load(os.path.join(src, case, f"rank{r}.{what}.pt"), weights_only=True) for r in (0, 1)]
            whole = dict(walk(torch.load(os.path.join(scratch, f"{case}.unsharded", f"{what}.pt"), weights_only=True)))
            for path, t0 in walk(ranks[0]):
                if not isinstance(t0, DTensor):
                    continue
                t1 = dict(walk(ranks[1]))[path]
                dim = t0.placements[0].dim
                want = torch.cat([t0.to_local(), t1.to_local()], dim=dim)
                got = whole.get(path)
                if got is None or isinstance(got, DTensor) or tuple(got.shape) != tuple(t0.shape):
                    fail(f"{case}/{what} {path}: unsharded {None if got is None else tuple(got.shape)}, want {tuple(t0.shape)}")
                if not torch.equal(got.view(torch.uint8), want.contiguous().view(torch.uint8)):
                    fail(f"{case}/{what} {path}: not the shards stacked along dim {dim}")
                n += 1
    print(f"ok: {n} DTensors unsharded to their shards stacked, bit for bit")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load_worker(rank, world, port, scratch):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from dcp_load_check import load_and_compare
    from gen_dcp_fsdp2 import patch_cpu_gloo
    from gen_heavyball_fsdp2 import Net

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    patch_cpu_gloo()
    torch.manual_seed(123)  # other values than the checkpoint's: loading must replace them
    model = Net()
    mesh = init_device_mesh("cpu", (world,))
    for block in model.blocks():
        fully_shard(block, mesh=mesh, reshard_after_forward=False)
    fully_shard(model, mesh=mesh, reshard_after_forward=False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    load_and_compare(model, opt, scratch, "", f"world {world}")
    dist.barrier()
    dist.destroy_process_group()


def main():
    import torch.multiprocessing as mp
    src, scratch = sys.argv[1], sys.argv[2]
    check_stacked(src, scratch)
    for world in (1, 2, 3):
        mp.spawn(load_worker, args=(world, free_port(), os.path.abspath(scratch)), nprocs=world, join=True)
    print("ok: the exported DCP checkpoint loads into FSDP2 + AdamW at world sizes 1, 2, 3, every tensor equal")


if __name__ == "__main__":
    main()
