"""Framework checkpoint directories (issue 19, item 6), torch 2.6 with trixie's python3-safetensors.

Usage: gen_framework_dirs.py OUTDIR
The file names and contents follow each framework's save code; the frameworks are not run (HF
transformers is too large to fetch; accelerate's save_state is a few torch.save calls):
  hf_trainer/checkpoint-6/   transformers Trainer._save_checkpoint: model.safetensors
                             (safetensors.torch.save_model), optimizer.pt (AdamW, HF's weight-decay
                             split: no decay for biases and LayerNorm weights), scheduler.pt
                             (LambdaLR), rng_state.pth ({python, numpy, cpu}), trainer_state.json;
                             training_args.bin is gen_hf_training_args.py's save_strategy replica
  accelerate/save_state/     accelerate's save_accelerator_state: model.safetensors, optimizer.bin,
                             scheduler.bin, random_states_0.pkl ({step, random_state,
                             numpy_random_seed, torch_manual_seed})
  accelerate_nan/save_state/ the same with a NaN planted in one exp_avg of optimizer.bin
Everything seeded; 6 AdamW steps.
"""
import json
import os
import random
import sys

import numpy as np
import torch
from safetensors.torch import save_model
from torch import nn


def net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Embedding(16, 8), nn.Linear(8, 8), nn.LayerNorm(8), nn.Linear(8, 3))


def hf_groups(model, wd=0.01):
    decay = []
    for mod_name, mod in model.named_modules():
        for n, _ in mod.named_parameters(recurse=False):
            if not isinstance(mod, nn.LayerNorm) and n != "bias":
                decay.append(f"{mod_name}.{n}" if mod_name else n)
    named = list(model.named_parameters())
    return [{"params": [p for n, p in named if n in decay], "weight_decay": wd},
            {"params": [p for n, p in named if n not in decay], "weight_decay": 0.0}]


def trained():
    model = net()
    opt = torch.optim.AdamW(hf_groups(model), lr=5e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 - s / 10)
    g = torch.Generator().manual_seed(1)
    for _ in range(6):
        model(torch.randint(0, 16, (4, 5), generator=g)).square().mean().backward()
        opt.step()
        opt.zero_grad()
        sched.step()
    return model, opt, sched


def main():
    out = sys.argv[1]
    random.seed(0)
    np.random.seed(0)
    model, opt, sched = trained()

    hf = os.path.join(out, "hf_trainer", "checkpoint-6")
    os.makedirs(hf, exist_ok=True)
    save_model(model, os.path.join(hf, "model.safetensors"))
    torch.save(opt.state_dict(), os.path.join(hf, "optimizer.pt"))
    torch.save(sched.state_dict(), os.path.join(hf, "scheduler.pt"))
    torch.save({"python": random.getstate(), "numpy": np.random.get_state(), "cpu": torch.random.get_rng_state()},
               os.path.join(hf, "rng_state.pth"))
    with open(os.path.join(hf, "trainer_state.json"), "w") as f:
        json.dump({"global_step": 6, "epoch": 1.0, "log_history": [], "best_model_checkpoint": None}, f, indent=2)

    for name, planted in (("accelerate", False), ("accelerate_nan", True)):
        d = os.path.join(out, name, "save_state")
        os.makedirs(d, exist_ok=True)
        save_model(model, os.path.join(d, "model.safetensors"))
        osd = opt.state_dict()
        if planted:
            osd["state"][1]["exp_avg"] = osd["state"][1]["exp_avg"].clone()
            osd["state"][1]["exp_avg"].view(-1)[2] = float("nan")
        torch.save(osd, os.path.join(d, "optimizer.bin"))
        torch.save(sched.state_dict(), os.path.join(d, "scheduler.bin"))
        torch.save({"step": 0, "random_state": random.getstate(), "numpy_random_seed": np.random.get_state(),
                    "torch_manual_seed": torch.get_rng_state()}, os.path.join(d, "random_states_0.pkl"))
    print(sorted(os.listdir(hf)))


if __name__ == "__main__":
    main()
