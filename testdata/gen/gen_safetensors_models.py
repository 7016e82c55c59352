"""Model weights in safetensors beside an index-keyed optimizer, as accelerate's save_state and
HF Trainer write them (issue 19: --model model.safetensors).

Usage (torch 2.6 chroot with python3-safetensors from trixie installed: apt-get install
python3-safetensors inside it): gen_safetensors_models.py OUTDIR
Uses the safetensors library itself (safetensors.torch.save_model, which accelerate calls).
Writes OUTDIR/<case>/model.safetensors and optimizer.bin (torch.save of AdamW's state_dict),
after 2 seeded steps:
  unique      every parameter's shape its own (the order is decidable from shapes alone)
  same_shape  two [8, 8] weights and three [8] biases (shapes cannot tell them apart)
safetensors sorts its header, so neither file records the module order.
"""
import os
import sys

import torch
from torch import nn


def nets():
    torch.manual_seed(0)
    yield "unique", nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 5), nn.ReLU(), nn.Linear(5, 3))
    torch.manual_seed(0)
    yield "same_shape", nn.Sequential(nn.Linear(6, 8), nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 3))


def main():
    # Only writing needs the library: tests import nets() from here in a chroot without it.
    from safetensors.torch import save_model

    out = sys.argv[1]
    for case, model in nets():
        d = os.path.join(out, case)
        os.makedirs(d, exist_ok=True)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        g = torch.Generator().manual_seed(1)
        for _ in range(2):
            model(torch.randn(5, 6, generator=g)).square().mean().backward()
            opt.step()
            opt.zero_grad()
        save_model(model, os.path.join(d, "model.safetensors"))
        torch.save(opt.state_dict(), os.path.join(d, "optimizer.bin"))
        print(case, [n for n, _ in model.named_parameters()])


if __name__ == "__main__":
    main()
