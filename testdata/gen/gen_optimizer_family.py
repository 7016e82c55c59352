"""Write {model, optimizer} checkpoints of every torch.optim algorithm verify replays.

Usage: python3 testdata/gen/gen_optimizer_family.py OUTDIR   (torch 1.13 and 2.6)
A small MLP (Linear 6->8, LayerNorm 8, Linear 8->3) trained 3 seeded steps by each case's
torch.optim class, saved as a training script saves it: `<case>.pt` = {"model": state_dict,
"optimizer": state_dict}. Beside each healthy file:
  <case>_cold.pt  the same, but one parameter's state replaced by what torch creates for it
                  from nothing: a fresh optimizer stepped once with zero gradients at lr 0
                  (torch.distributed.checkpoint's _init_optim_state), the leak verify must find;
  <case>_nan.pt   the same, with a NaN in one element of one state tensor.
truth.json names, for every file, the algorithm, the parameter made cold and the one with a NaN.
"""
import os
import sys

import torch
from fixture_io import write_json

CASES = [
    ("sgd_plain", "SGD", dict(lr=0.1)),
    ("sgd_momentum", "SGD", dict(lr=0.05, momentum=0.9, weight_decay=1e-4)),
    ("sgd_nesterov", "SGD", dict(lr=0.05, momentum=0.9, nesterov=True)),
    ("sgd_dampening", "SGD", dict(lr=0.05, momentum=0.9, dampening=0.5)),
    ("adam_amsgrad", "Adam", dict(lr=1e-2, amsgrad=True, weight_decay=1e-2)),
    ("adagrad", "Adagrad", dict(lr=5e-2, lr_decay=1e-3, initial_accumulator_value=0.1)),
    ("rmsprop", "RMSprop", dict(lr=1e-3)),
    ("rmsprop_centered_momentum", "RMSprop", dict(lr=1e-3, alpha=0.9, centered=True, momentum=0.9)),
]
COLD, NAN = "2.weight", "0.bias"  # the parameters each variant spoils


def model():
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.LayerNorm(8), torch.nn.Linear(8, 3))


def train(algorithm, hyper, seed):
    torch.manual_seed(seed)
    net = model()
    opt = getattr(torch.optim, algorithm)(net.parameters(), **hyper)
    for _ in range(3):
        x, y = torch.randn(16, 6), torch.randn(16, 3)
        opt.zero_grad()
        torch.nn.functional.mse_loss(net(x), y).backward()
        opt.step()
    return net, opt


def fresh_state(algorithm, hyper, net, name):
    """The state torch's DCP init gives one parameter: zero gradient, one step at lr 0."""
    params = dict(net.named_parameters())
    p = torch.nn.Parameter(params[name].detach().clone())
    opt = getattr(torch.optim, algorithm)([p], **dict(hyper, lr=0.0))
    p.grad = torch.zeros_like(p)
    opt.step()
    return opt.state_dict()["state"].get(0, {})


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    truth = {"torch": str(torch.__version__), "files": {}}
    for seed, (name, algorithm, hyper) in enumerate(CASES):
        net, opt = train(algorithm, hyper, 200 + seed)
        names = [n for n, _ in net.named_parameters()]
        sd = {"model": net.state_dict(), "optimizer": opt.state_dict()}
        torch.save(sd, os.path.join(out, f"{name}.pt"))
        stateful = bool(sd["optimizer"]["state"]) and any(
            torch.is_tensor(v) and v.numel() > 1 for s in sd["optimizer"]["state"].values() for v in s.values())
        truth["files"][f"{name}.pt"] = {"algorithm": algorithm.lower(), "cold": [], "nan": []}
        if not stateful:
            continue  # plain SGD keeps no state: nothing to spoil
        index = {n: i for i, n in enumerate(names)}
        cold = {"model": net.state_dict(), "optimizer": opt.state_dict()}
        cold["optimizer"]["state"][index[COLD]] = fresh_state(algorithm, hyper, net, COLD)
        torch.save(cold, os.path.join(out, f"{name}_cold.pt"))
        truth["files"][f"{name}_cold.pt"] = {"algorithm": algorithm.lower(), "cold": [COLD], "nan": []}
        nan = {"model": net.state_dict(), "optimizer": opt.state_dict()}
        entry = {k: (v.clone() if torch.is_tensor(v) else v) for k, v in nan["optimizer"]["state"][index[NAN]].items()}
        field = next(k for k, v in entry.items() if torch.is_tensor(v) and v.numel() > 1)
        entry[field].view(-1)[3] = float("nan")
        nan["optimizer"]["state"][index[NAN]] = entry
        torch.save(nan, os.path.join(out, f"{name}_nan.pt"))
        truth["files"][f"{name}_nan.pt"] = {"algorithm": algorithm.lower(), "cold": [], "nan": [NAN],
                                            "nan_field": field}
    write_json(os.path.join(out, "truth.json"), truth, sort_keys=True)
    print(f"{out}: {len(truth['files'])} checkpoints")


if __name__ == "__main__":
    main()
