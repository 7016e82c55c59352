"""Combined checkpoints as plain PyTorch training scripts save them: one torch.save of a dict
holding the model, the optimizer and bookkeeping, some of it tensors (issue 19: a top-level
tensor must not make the whole file "the model").

Usage: gen_combined_checkpoints.py OUTDIR
  run with torch 1.13 (/usr/bin/python3) and torch 2.6 (testdata/gen/torch26-python.sh).
Writes, for a small conv net (a BatchNorm among its modules) trained 3 seeded steps:
  imagenet_examples.pth.tar  pytorch/examples' imagenet/main.py save_checkpoint layout: epoch,
                             arch, state_dict, best_acc1 (a 0-d tensor, as accuracy() returns),
                             optimizer (SGD, momentum 0.9, weight decay 1e-4), scheduler (StepLR)
  adamw_rng_state.pt         {model, optimizer (AdamW), rng_state (torch.get_rng_state()), epoch}
  adamw_rng_state_nan.pt     the same with a NaN planted in one exp_avg (what validate must catch)
  cosine_to_zero.pt          {model, optimizer, scheduler}: AdamW under CosineAnnealingLR(T_max=3,
                             eta_min=0) stepped 3 times, so lr is 0 at the end of a healthy run
  cosine_to_zero_optim.pt    that optimizer's state_dict alone (groups keep initial_lr; no
                             scheduler state to say the schedule ended)
  two_optimizers.pt          {model, optimizer (AdamW), optimizer_sgd (SGD over the same model)}:
                             the parameter rules need --state-key to know which to check
  adamw_optim_nan.pt         adamw_rng_state_nan.pt's optimizer alone (an optimizer.pt without any
                             model: verify must still find the NaN)
  adamw_optim_cold.pt        that optimizer alone with one parameter's moments zeroed (state that
                             would change nothing: verify calls it cold without a model)
"""
import os
import sys

import torch
from torch import nn


def net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 6 * 6, 10))


def train(model, opt, steps=3):
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = torch.randn(4, 3, 8, 8, generator=g)
        y = torch.randint(0, 10, (4,), generator=g)
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    model = net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=30, gamma=0.1)
    train(model, opt)
    sched.step()
    torch.save({"epoch": 1, "arch": "tinynet", "state_dict": model.state_dict(), "best_acc1": torch.tensor(12.5),
                "optimizer": opt.state_dict(), "scheduler": sched.state_dict()},
               os.path.join(out, "imagenet_examples.pth.tar"))

    model = net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    train(model, opt)
    ckpt = {"model": model.state_dict(), "optimizer": opt.state_dict(), "rng_state": torch.get_rng_state(),
            "epoch": 3}
    torch.save(ckpt, os.path.join(out, "adamw_rng_state.pt"))
    ckpt["optimizer"]["state"][0]["exp_avg"].view(-1)[5] = float("nan")
    torch.save(ckpt, os.path.join(out, "adamw_rng_state_nan.pt"))
    torch.save(ckpt["optimizer"], os.path.join(out, "adamw_optim_nan.pt"))
    ckpt["optimizer"]["state"][0]["exp_avg"].view(-1)[5] = 0.0
    ckpt["optimizer"]["state"][4]["exp_avg"].zero_()
    ckpt["optimizer"]["state"][4]["exp_avg_sq"].zero_()
    torch.save(ckpt["optimizer"], os.path.join(out, "adamw_optim_cold.pt"))

    model = net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=3, eta_min=0)
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        x = torch.randn(4, 3, 8, 8, generator=g)
        y = torch.randint(0, 10, (4,), generator=g)
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()
        sched.step()
    assert opt.param_groups[0]["lr"] == 0, opt.param_groups[0]["lr"]
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict()},
               os.path.join(out, "cosine_to_zero.pt"))
    torch.save(opt.state_dict(), os.path.join(out, "cosine_to_zero_optim.pt"))

    model = net()
    adamw = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sgd = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    train(model, adamw)
    train(model, sgd)
    torch.save({"model": model.state_dict(), "optimizer": adamw.state_dict(), "optimizer_sgd": sgd.state_dict()},
               os.path.join(out, "two_optimizers.pt"))
    print(torch.__version__, sorted(os.listdir(out)))


if __name__ == "__main__":
    main()
