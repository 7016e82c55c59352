"""Write the many-small-tensors checkpoint of issue 42's target: 10^4 parameters
of 4096 float32 each (16 KiB) with AdamW state, 4 * 10^4 tensors in ~0.5 GB,
where validate's cost is per tensor (the pickle, the zip directory, one local
header and one CRC per record), not per byte.

Usage: /usr/bin/python3 bench/make_small_tensor_checkpoint.py OUT.pt [PARAMS=10000]
"""
import sys

import torch


def main():
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
    torch.manual_seed(0)
    model = {f"layer{i}.weight": torch.randn(4096) for i in range(n)}
    state = {i: {"step": torch.tensor(3.0), "exp_avg": torch.randn(4096), "exp_avg_sq": torch.rand(4096)}
             for i in range(n)}
    group = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01, "amsgrad": False,
             "maximize": False, "foreach": None, "capturable": False, "differentiable": False, "fused": None,
             "params": list(range(n))}
    torch.save({"model": model, "optimizer": {"state": state, "param_groups": [group]}}, out)


if __name__ == "__main__":
    main()
