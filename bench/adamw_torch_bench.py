"""AdamW step time in PyTorch, for the table in BENCHMARKS.md (bench/adamw_bench.sh runs it).

Usage: python3 bench/adamw_torch_bench.py VARIANT MILLION_PARAMS STEPS
VARIANT: foreach (torch.optim.AdamW(foreach=True)) or fused (fused=True, torch >= 2.4 on CPU).
Prints one Markdown row per thread count (1, 2): best of STEPS steps over 100 float32
tensors, with the same hyperparameters as adamw_bench.
"""
import sys
import time

import torch

variant, millions, steps = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
n = int(millions * 1e6)
per = n // 100
# Distinct values: memory holding one repeated value can be merged behind our
# back (same-page merging) and then reads far faster than DRAM allows.
torch.manual_seed(0)
params = [torch.rand(per if i < 99 else n - 99 * per).add_(0.25).requires_grad_() for i in range(100)]
for p in params:
    p.grad = torch.rand_like(p).mul_(0.02)
kwargs = {"foreach": True} if variant == "foreach" else {"fused": True}
opt = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, **kwargs)
opt.step()  # creates the state outside the timing
for threads in (1, 2):
    torch.set_num_threads(threads)
    best = 1e30
    for _ in range(steps):
        t0 = time.perf_counter()
        opt.step()
        best = min(best, time.perf_counter() - t0)
    print(f"| torch {torch.__version__} AdamW {variant} | {threads} | {best:.4f} | {28 * n / best / 1e9:.2f} | |")
