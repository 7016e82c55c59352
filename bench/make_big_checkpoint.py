"""Write a large torch.optim.AdamW-shaped optimizer checkpoint for benchmarks.

Usage: /usr/bin/python3 bench/make_big_checkpoint.py OUT.pt [GIB] [--ptr-shape] [--heavyball-like=FILE]
The state has the layout AdamW.state_dict() produces (int keys, 0-d float32
step, fp32 exp_avg / exp_avg_sq) for a transformer-like set of parameters
totalling about GIB GiB of state (default 3.2). Values are random, built
directly rather than by stepping an optimizer, which would need the same
memory three times over. With --ptr-shape the state is keyed the HeavyBall
0.12.3-0.24 way, (data_ptr, shape), with addresses laid out as an allocator
would, and OUT.manifest.json lists the parameters with those addresses.
With --heavyball-like=FILE (a real HeavyBall 0.24.4 AdamW file, e.g.
testdata/heavyball/migrate/0.24.4/adamw_foreach/optim.pt) the state is what
that HeavyBall saves instead: exp_avg / exp_avg_sq only, and FILE's param
group (its hyperparameters and step counter) over the new parameters: a
legacy file for `optstate migrate` at scale.
"""
import json
import sys

import torch


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    ptr_shape = "--ptr-shape" in sys.argv
    like = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--heavyball-like=")), None)
    ptr_shape = ptr_shape or like is not None
    out = args[0]
    gib = float(args[1]) if len(args) > 1 else 3.2
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
    address = 0x7F3A00000000
    manifest = []
    for layer_index in range(layers):
        for shape_index, shape in enumerate(layer):
            nbytes = torch.Size(shape).numel() * 4
            manifest.append({"name": f"layers.{layer_index}.p{shape_index}", "shape": list(shape),
                             "dtype": "float32", "data_ptr": address, "nbytes": nbytes})
            key = (address, tuple(shape)) if ptr_shape else index
            address += (nbytes + 511) // 512 * 512
            state[key] = {"exp_avg": torch.randn(shape, generator=g) * 1e-3,
                          "exp_avg_sq": torch.rand(shape, generator=g) * 1e-6}
            if like is None:
                state[key]["step"] = torch.tensor(1000.0)
            index += 1
    groups = [{"lr": 3e-4, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.1,
               "amsgrad": False, "maximize": False, "foreach": None, "capturable": False,
               "differentiable": False, "fused": None, "params": list(range(index))}]
    if like is not None:
        groups = [dict(torch.load(like)["param_groups"][0], params=list(range(index)))]
    torch.save({"state": state, "param_groups": groups}, out)
    if ptr_shape:
        with open(out.rsplit(".", 1)[0] + ".manifest.json", "w") as f:
            json.dump({"format": "optstate-param-manifest", "version": 1, "params": manifest}, f)
    print(f"{out}: {layers} layers, {index} parameters")


if __name__ == "__main__":
    main()
