"""Checkpoints of wrapped models, as torch 2.6 itself names their parameters (issue 19: remap
--to fqn must write the names torch.distributed.checkpoint.state_dict uses, without wrappers).

Usage (torch 2.6): gen_wrapped_models.py OUTDIR
Writes {model: wrapped.state_dict(), optimizer: AdamW.state_dict() (index keys)} after 2 seeded
steps for one small net wrapped each way:
  ddp.pt                 DistributedDataParallel (gloo, one process): "module.0.weight", ...
  compiled.pt            torch.compile (OptimizedModule; never run compiled): "_orig_mod.0.weight"
  checkpoint_wrapped.pt  activation checkpointing on the middle Linear:
                         "1._checkpoint_wrapped_module.weight"
"""
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper


def net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3))


def train(model, steps=2):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        model(torch.randn(5, 6, generator=g)).square().mean().backward()
        opt.step()
        opt.zero_grad()
    return opt


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29531")
    dist.init_process_group("gloo", rank=0, world_size=1)
    ddp = nn.parallel.DistributedDataParallel(net())
    opt = train(ddp)
    torch.save({"model": ddp.state_dict(), "optimizer": opt.state_dict()}, os.path.join(out, "ddp.pt"))
    dist.destroy_process_group()

    compiled = torch.compile(net())
    opt = train(compiled._orig_mod)  # the same parameters; nothing is compiled
    torch.save({"model": compiled.state_dict(), "optimizer": opt.state_dict()}, os.path.join(out, "compiled.pt"))

    model = net()
    model[1] = checkpoint_wrapper(model[1])
    opt = train(model)
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()},
               os.path.join(out, "checkpoint_wrapped.pt"))
    for name in sorted(os.listdir(out)):
        print(name, list(torch.load(os.path.join(out, name), weights_only=True)["model"])[:3])


if __name__ == "__main__":
    main()
