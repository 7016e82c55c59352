"""The rank-set oracle's torch side: what optstate made whole of a sharded save equals the run's truth.

Usage (any torch): compare_truth.py TRUTH UNSHARDED REMAPPED [--whole]
  TRUTH      what the generator recorded of the run: the one-process run keyed by FQN as
             FULL_STATE_DICT keys it (FSDP1), or each DTensor's full_tensor() (FSDP2)
  UNSHARDED  `optstate unshard` of every rank's file
  REMAPPED   `optstate remap --to index` of UNSHARDED
1. UNSHARDED's model and optimizer state equal TRUTH's bit for bit (same names, shapes, dtypes,
   values; param_groups the same, dict keys in any order), and no tensor in it is sharded.
2. REMAPPED loads into torch.optim.AdamW over the same model and, after one more step on a fresh
   batch, gives the same parameters and moments, bit for bit, as TRUTH's optimizer resumed so; and
   so does UNSHARDED itself, its names mapped to the parameters as DSD maps them (tensors as loaded:
   a step tensor shared between entries would count one step per parameter).
--whole: UNSHARDED is the saved file itself (FULL_STATE_DICT), not optstate's output, so check 2's
last part, which judges what optstate wrote, is not asked of it.
Prints "agrees" or the first difference; exits 0 either way (the driver counts), 2 on unreadable input.
"""
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from same_tree import same  # noqa: E402


def net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.Linear(8, 3))


def by_key(obj):
    """Dicts with their entries in key order, so that order, which torch maps nothing by, is not compared."""
    if isinstance(obj, dict):
        return {k: by_key(obj[k]) for k in sorted(obj, key=str)}
    if isinstance(obj, (list, tuple)):
        return type(obj)(by_key(x) for x in obj)
    return obj


def resumed(model_state, optim_state):
    torch.set_num_threads(1)
    model = net()
    model.load_state_dict(model_state)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    opt.load_state_dict(optim_state)
    g = torch.Generator().manual_seed(99)
    x, y = torch.randn(4, 6, generator=g), torch.randn(4, 3, generator=g)
    opt.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    return {"model": model.state_dict(), "optimizer": opt.state_dict()["state"]}


def indexed(optim):
    """An optimizer state dict keyed by FQN (FULL_STATE_DICT, DSD) keyed by index, tensors untouched."""
    names = [n for g in optim["param_groups"] for n in g["params"]]
    if not all(isinstance(n, str) for n in names):
        return optim
    groups, first = [], 0
    for g in optim["param_groups"]:
        groups.append(dict(g, params=list(range(first, first + len(g["params"])))))
        first += len(g["params"])
    return {"state": {i: optim["state"][n] for i, n in enumerate(names) if n in optim["state"]},
            "param_groups": groups}


def main():
    truth_path, unsharded_path, remapped_path = sys.argv[1:4]
    try:
        truth = torch.load(truth_path)
        unsharded = torch.load(unsharded_path)
        remapped = torch.load(remapped_path)
    except Exception as e:  # noqa: BLE001 - reported, the driver decides
        print(f"cannot load: {type(e).__name__}: {e}")
        sys.exit(2)
    d = same(by_key(truth), by_key(unsharded))
    if not d:
        want = by_key(resumed(truth["model"], indexed(truth["optimizer"])))
        d = same(want, by_key(resumed(remapped["model"], remapped["optimizer"])))
        d = d and "resumed after remap: " + d
    if not d and "--whole" not in sys.argv[4:]:
        # as DSD's set_optimizer_state_dict would: names mapped to the parameters, tensors as loaded
        d = same(want, by_key(resumed(unsharded["model"], indexed(unsharded["optimizer"]))))
        d = d and "resumed from the unsharded file: " + d
    print(d or "agrees")


if __name__ == "__main__":
    main()
