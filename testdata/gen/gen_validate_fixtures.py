"""Checkpoints that each break one `optstate validate` rule, written by real torch.

Usage: /usr/bin/python3 testdata/gen/gen_validate_fixtures.py OUTDIR   (torch 1.13)
Each is a small AdamW run (3 steps, seeded) saved with torch.save, changed the
way the problem arises in practice:
  lr_zero_leak.pt         param_groups saved with lr 0 after steps were taken (the lr=0
                          of DCP's init step kept by per-parameter group copies)
  duplicate_param.pt      param_groups[0]["params"] lists index 0 twice (hand-merged groups)
  frozen_param.pt         a parameter frozen from the start: in the group, never stepped,
                          so it has no state
  ghost_state.pt          FQN-keyed state (DSD layout) with an entry for a parameter the
                          groups do not list (a renamed or removed layer)
  args_namespace.pt       the training script's argparse.Namespace saved beside the state:
                          a global outside torch 2.6's weights_only allowlist
  frozen_backbone.pt      {"model", "optimizer"}: the first layer frozen and left out of the
                          optimizer (fine-tuning): the model has parameters no group lists
  foreign_optimizer.pt    {"model", "optimizer"}: the optimizer of a larger model saved beside
                          a smaller model (state from another run)
  weight_decay_groups.pt  {"model", "optimizer"}: the usual two groups (decay for weights, none
                          for biases); with weight_decay_groups.manifest.json, written the way
                          the README says (with "group"), and weight_decay_groups.regrouped.manifest.json,
                          the manifest of an optimizer that grouped the same model differently
"""
import json
import argparse
import os
import sys

import torch
import torch.nn as nn


def trained(freeze_bias=False):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))
    if freeze_bias:
        model[0].bias.requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(3):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    return model, opt


def two_groups(model, weights_first):
    w = [p for n, p in model.named_parameters() if n.endswith("weight")]
    b = [p for n, p in model.named_parameters() if n.endswith("bias")]
    groups = [w, b] if weights_first else [w + b[:1], b[1:]]
    return torch.optim.AdamW([{"params": groups[0], "weight_decay": 0.1},
                              {"params": groups[1], "weight_decay": 0.0}], lr=1e-2)


def step(model, opt, n=3):
    for _ in range(n):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()


def manifest(model, opt):
    """As the README writes it, with each parameter's group."""
    names = {id(p): n for n, p in model.named_parameters()}
    params = [{"name": names[id(p)], "shape": list(p.shape), "dtype": str(p.dtype).replace("torch.", ""),
               "nbytes": p.numel() * p.element_size(), "group": gi}
              for gi, g in enumerate(opt.param_groups) for p in g["params"]]
    return {"format": "optstate-param-manifest", "version": 1, "params": params}


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    cases = {}
    _, opt = trained()
    sd = opt.state_dict()
    sd["param_groups"][0]["lr"] = 0.0
    cases["lr_zero_leak.pt"] = sd
    _, opt = trained()
    sd = opt.state_dict()
    sd["param_groups"][0]["params"].append(0)
    cases["duplicate_param.pt"] = sd
    _, opt = trained(freeze_bias=True)
    cases["frozen_param.pt"] = opt.state_dict()
    model, opt = trained()
    names = [n for n, _ in model.named_parameters()]
    sd = opt.state_dict()
    sd["state"] = {names[i]: v for i, v in sd["state"].items()}
    sd["state"]["head.weight"] = dict(sd["state"][names[0]])
    sd["param_groups"][0]["params"] = names
    cases["ghost_state.pt"] = sd
    _, opt = trained()
    cases["args_namespace.pt"] = {"optimizer": opt.state_dict(), "args": argparse.Namespace(lr=1e-2, steps=3)}
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))
    model[0].requires_grad_(False)
    opt = torch.optim.AdamW(model[2].parameters(), lr=1e-2)
    step(model, opt)
    cases["frozen_backbone.pt"] = {"model": model.state_dict(), "optimizer": opt.state_dict()}
    _, opt = trained()
    cases["foreign_optimizer.pt"] = {"model": nn.Linear(4, 3).state_dict(), "optimizer": opt.state_dict()}
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))
    opt = two_groups(model, weights_first=True)
    step(model, opt)
    cases["weight_decay_groups.pt"] = {"model": model.state_dict(), "optimizer": opt.state_dict()}
    manifests = {"weight_decay_groups.manifest.json": manifest(model, opt),
                 "weight_decay_groups.regrouped.manifest.json": manifest(model, two_groups(model, False))}
    for name, obj in cases.items():
        path = os.path.join(out, name)
        torch.save(obj, path)
        print(f"{path}: {os.path.getsize(path)} bytes")
    for name, doc in manifests.items():
        path = os.path.join(out, name)
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
