"""Write a large torch.optim.AdamW-shaped optimizer checkpoint for benchmarks.

Usage: /usr/bin/python3 bench/make_big_checkpoint.py OUT.pt [GIB]
The state has the layout AdamW.state_dict() produces (int keys, 0-d float32
step, fp32 exp_avg / exp_avg_sq) for a transformer-like set of parameters
totalling about GIB GiB of state (default 3.2). Values are random, built
directly rather than by stepping an optimizer, which would need the same
memory three times over.
"""
import sys

import torch


def main():
    out = sys.argv[1]
    gib = float(sys.argv[2]) if len(sys.argv) > 2 else 3.2
    hidden = 1024
    # Per layer: qkv, out, two MLP matrices and their biases, two norms.
    layer = [(3 * hidden, hidden), (3 * hidden,), (hidden, hidden), (hidden,),
             (4 * hidden, hidden), (4 * hidden,), (hidden, 4 * hidden), (hidden,),
             (hidden,), (hidden,), (hidden,), (hidden,)]
    per_layer = sum(torch.Size(s).numel() for s in layer) * 4 * 2  # two fp32 moments
    layers = max(1, int(gib * 2**30 // per_layer))
    g = torch.Generator().manual_seed(0)
    state = {}
    index = 0
    for _ in range(layers):
        for shape in layer:
            state[index] = {"step": torch.tensor(1000.0),
                            "exp_avg": torch.randn(shape, generator=g) * 1e-3,
                            "exp_avg_sq": torch.rand(shape, generator=g) * 1e-6}
            index += 1
    groups = [{"lr": 3e-4, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.1,
               "amsgrad": False, "maximize": False, "foreach": None, "capturable": False,
               "differentiable": False, "fused": None, "params": list(range(index))}]
    torch.save({"state": state, "param_groups": groups}, out)
    print(f"{out}: {layers} layers, {index} parameters")


if __name__ == "__main__":
    main()
