"""Write optimizer_parity.pt: torch.optim's own SGD, Adam, Adagrad and RMSprop trajectories.

Usage: python3 testdata/gen/gen_optimizer_parity.py OUTDIR   (any torch; run under 1.13 and 2.6)
The same layout as gen_adamw_parity.py, for the rest of the kernel family: each case runs one
torch.optim class (single-tensor, as torch uses on CPU) for 20 steps on parameters of shapes
[37], [5, 7] and [] with seeded gradients. Tensors are stored flat, one row per step, the
parameters concatenated in order: params [21, N] (row 0: before the first step), grads [20, N],
and one [20, N] tensor per state field (`fields` names them, in the order torch keeps them),
`step` [20, 3] where the algorithm counts steps. `hyper` holds every constructor argument.
`group_keys` and `state_keys` are the keys torch's state_dict() wrote for this algorithm (what
regenerate must write too). Low-precision cases step a float32 copy rounded to the parameter
dtype after every step, with low-precision gradients: the fused kernels keep float32 state.
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
    ("sgd_plain", "SGD", torch.float32, dict(lr=0.1)),
    ("sgd_momentum", "SGD", torch.float32, dict(lr=0.05, momentum=0.9)),
    ("sgd_dampening_decay", "SGD", torch.float32, dict(lr=0.05, momentum=0.8, dampening=0.3, weight_decay=1e-2)),
    ("sgd_nesterov_maximize", "SGD", torch.float32, dict(lr=0.02, momentum=0.9, nesterov=True, weight_decay=5e-4,
                                                         maximize=True)),
    ("sgd_bfloat16", "SGD", torch.bfloat16, dict(lr=0.05, momentum=0.9, weight_decay=1e-4)),
    ("adam_default", "Adam", torch.float32, dict(lr=1e-3)),
    ("adam_amsgrad_decay", "Adam", torch.float32, dict(lr=1e-2, betas=(0.9, 0.99), eps=1e-6, weight_decay=0.1,
                                                       amsgrad=True)),
    ("adam_maximize_low_beta1", "Adam", torch.float32, dict(lr=3e-3, betas=(0.3, 0.95), maximize=True)),
    ("adam_float16", "Adam", torch.float16, dict(lr=1e-2, weight_decay=1e-2)),
    ("adagrad_default", "Adagrad", torch.float32, dict(lr=1e-2)),
    ("adagrad_decay_init", "Adagrad", torch.float32, dict(lr=5e-2, lr_decay=1e-2, weight_decay=1e-2,
                                                          initial_accumulator_value=0.1, eps=1e-8)),
    ("adagrad_maximize", "Adagrad", torch.float32, dict(lr=1e-2, maximize=True)),
    ("adagrad_bfloat16", "Adagrad", torch.bfloat16, dict(lr=1e-2, weight_decay=1e-3)),
    ("rmsprop_default", "RMSprop", torch.float32, dict(lr=1e-2)),
    ("rmsprop_centered", "RMSprop", torch.float32, dict(lr=1e-3, alpha=0.9, centered=True, weight_decay=1e-2)),
    ("rmsprop_momentum", "RMSprop", torch.float32, dict(lr=1e-3, momentum=0.9, eps=1e-6)),
    ("rmsprop_centered_momentum_maximize", "RMSprop", torch.float32, dict(lr=1e-3, alpha=0.95, momentum=0.5,
                                                                          centered=True, maximize=True)),
    ("rmsprop_float16", "RMSprop", torch.float16, dict(lr=1e-3, momentum=0.9)),
]
# The state fields each algorithm keeps, in the order its step() creates them.
FIELDS = {
    "SGD": lambda h: ["momentum_buffer"] if h.get("momentum", 0) != 0 else [],
    "Adam": lambda h: ["exp_avg", "exp_avg_sq"] + (["max_exp_avg_sq"] if h.get("amsgrad") else []),
    "Adagrad": lambda h: ["sum"],
    "RMSprop": lambda h: (["square_avg"] + (["momentum_buffer"] if h.get("momentum", 0) > 0 else [])
                          + (["grad_avg"] if h.get("centered") else [])),
}


def run(name, algorithm, dtype, hyper, seed):
    g = torch.Generator().manual_seed(seed)
    numels = [math.prod(s) for s in SHAPES]
    params = [torch.nn.Parameter(torch.randn(s, generator=g).to(dtype).float()) for s in SHAPES]
    opt = getattr(torch.optim, algorithm)(params, foreach=False, **hyper)
    fields = FIELDS[algorithm](hyper)
    rows = {"params": [flat(params)], "grads": [], "step": []}
    for f in fields:
        rows[f] = []
    record_steps(params, opt, dtype, g, STEPS, rows, fields)
    sd = opt.state_dict()
    case = {"name": name, "algorithm": algorithm, "dtype": str(dtype).replace("torch.", ""), "shapes": SHAPES,
            "numels": numels, "fields": fields,
            "hyper": {k: (list(v) if isinstance(v, tuple) else v) for k, v in opt.defaults.items()
                      if isinstance(v, (int, float, bool, tuple))},
            "group_keys": [k for k in sd["param_groups"][0].keys()],
            "state_keys": [k for k in sd["state"][0].keys()]}
    for k, v in rows.items():
        if v:
            case[k] = torch.stack(v)
    return case


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    cases = [run(name, alg, dtype, hyper, 100 + seed) for seed, (name, alg, dtype, hyper) in enumerate(CASES)]
    path = os.path.join(out, "optimizer_parity.pt")
    torch.save({"format": "optstate-optimizer-parity", "version": 1, "torch": str(torch.__version__),
                "steps": STEPS, "cases": cases}, path)
    describe.write_expected(path, f"torch.optim SGD, Adam, Adagrad and RMSprop trajectories (20 steps, "
                                  f"{len(cases)} hyperparameter sets) for the fused kernels to match")
    print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
