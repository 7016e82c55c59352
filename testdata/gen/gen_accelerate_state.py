"""A real accelerate save_state directory.

Usage (torch 2.6 chroot): gen_accelerate_state.py SRC[:SRC...] OUTDIR
SRC: the src/ folders of huggingface/accelerate tag v1.12.0 and huggingface/huggingface_hub
v0.36.0, extracted outside the project (git archive TAG src); their other imports (numpy, psutil,
PyYAML, packaging, safetensors, requests, filelock, fsspec, tqdm) from Debian trixie.
An Accelerator on CPU prepares a small model, AdamW and a LambdaLR; 6 seeded steps; then
save_state(OUTDIR/accelerate_1.12.0/save_state): model.safetensors, optimizer.bin,
scheduler.bin, random_states_0.pkl, as accelerate writes them.
"""
import os
import sys

import torch
from torch import nn

sys.path[:0] = sys.argv[1].split(":")
from accelerate import Accelerator  # noqa: E402
from accelerate.utils import set_seed  # noqa: E402


def main():
    out = os.path.join(sys.argv[2], "accelerate_1.12.0", "save_state")
    set_seed(0)
    accelerator = Accelerator(cpu=True)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0 / (1 + step))
    model, opt, sched = accelerator.prepare(model, opt, sched)
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    for _ in range(6):
        loss = nn.functional.mse_loss(model(x), y)
        accelerator.backward(loss)
        opt.step()
        sched.step()
        opt.zero_grad()
    accelerator.save_state(out)
    print(out)


if __name__ == "__main__":
    main()
