"""Write adamw_parity.pt: torch.optim.AdamW's own trajectory, for the fused kernel to match.

Usage: python3 testdata/gen/gen_adamw_parity.py OUTDIR   (any torch; run under 1.13 and 2.6)
Each case runs torch.optim.AdamW (single-tensor, as torch uses on CPU) for 20 steps on
three parameters of shapes [37], [5, 7] and [] with seeded gradients, and records the
parameters and state after every step. Tensors are stored flat, one row per step,
the three parameters concatenated in order (`shapes` says how to split a row):
  params [21, N] (row 0: before the first step), grads [20, N], exp_avg / exp_avg_sq /
  max_exp_avg_sq [20, N] (the last only with amsgrad), step [20, 3].
Low-precision cases model a bfloat16/float16 parameter with float32 state, as the
fused kernel keeps it: torch steps a float32 copy, which is rounded to the low
precision after every step, and gradients are low-precision values.
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import describe  # noqa: E402
from parity_steps import flat, record_steps  # noqa: E402

SHAPES = [[37], [5, 7], []]
STEPS = 20
CASES = [
    ("default", torch.float32, dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2)),
    ("amsgrad_decay", torch.float32, dict(lr=1e-2, betas=(0.9, 0.99), eps=1e-6, weight_decay=0.1, amsgrad=True)),
    ("maximize_low_beta1", torch.float32, dict(lr=3e-3, betas=(0.3, 0.95), eps=1e-8, weight_decay=0.0,
                                               maximize=True)),
    ("large_lr_no_decay", torch.float32, dict(lr=0.5, betas=(0.8, 0.9), eps=1e-3, weight_decay=0.0)),
    ("bfloat16_params", torch.bfloat16, dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2)),
    ("float16_params", torch.float16, dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                                           amsgrad=True)),
]


def run(name, dtype, hyper, seed):
    g = torch.Generator().manual_seed(seed)
    numels = [math.prod(s) for s in SHAPES]
    params = [torch.nn.Parameter(torch.randn(s, generator=g).to(dtype).float()) for s in SHAPES]
    opt = torch.optim.AdamW(params, foreach=False, **hyper)
    rows = {"params": [flat(params)], "grads": [], "exp_avg": [], "exp_avg_sq": [], "max_exp_avg_sq": [],
            "step": []}
    fields = ["exp_avg", "exp_avg_sq"] + (["max_exp_avg_sq"] if hyper.get("amsgrad") else [])
    record_steps(params, opt, dtype, g, STEPS, rows, fields)
    case = {"name": name, "dtype": str(dtype).replace("torch.", ""), "shapes": SHAPES, "numels": numels,
            "lr": hyper["lr"], "beta1": hyper["betas"][0], "beta2": hyper["betas"][1], "eps": hyper["eps"],
            "weight_decay": hyper["weight_decay"], "amsgrad": hyper.get("amsgrad", False),
            "maximize": hyper.get("maximize", False)}
    for k, v in rows.items():
        if v:
            case[k] = torch.stack(v)
    return case


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    cases = [run(name, dtype, hyper, seed) for seed, (name, dtype, hyper) in enumerate(CASES)]
    path = os.path.join(out, "adamw_parity.pt")
    torch.save({"format": "optstate-adamw-parity", "version": 1, "torch": str(torch.__version__), "steps": STEPS,
                "cases": cases}, path)
    describe.write_expected(path, "torch.optim.AdamW trajectories (20 steps, 6 hyperparameter sets) for "
                                  "the fused kernel to match")
    print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
