"""Resume a `migrate --to torch` file in torch.optim.AdamW and measure how it continues the old run.

Usage: resume_in_torch_adamw.py CASE_DIR MIGRATED
  CASE_DIR  a legacy AdamW case of testdata/heavyball/migrate (model.pt, model.continued.pt: the
            same HeavyBall run 3 steps further)
  MIGRATED  what `optstate migrate --to torch CASE_DIR/optim.pt ...` wrote
Loads the saved model, the migrated state into torch.optim.AdamW (every parameter must get state),
trains the run's next 3 batches, and prints the L2 distance of all parameters to the old run's,
beside the same from fresh AdamW state. Exit 1 unless the migrated file is over 5x closer.
Runs with torch 1.13 (the README's main job) and 2.6 (interop_heavyball_migrate, weights_only).
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "testdata", "gen"))
from gen_heavyball_migrate import CONTINUED, LR, SAVED, Net, batches  # noqa: E402

# torch 1.13's weights_only cannot load a float; 2.x's can.
WEIGHTS_ONLY = int(torch.__version__.split(".")[0]) >= 2


def load(path):
    return torch.load(path, weights_only=WEIGHTS_ONLY)


def resume_distances(case_dir, migrated):
    """{"migrated": d, "fresh": d}, or raises SystemExit when the state does not load onto the model."""
    ref = load(os.path.join(case_dir, "model.continued.pt"))
    data = batches(SAVED + CONTINUED)[SAVED:]
    distances = {}
    for how in ("migrated", "fresh"):
        model = Net()
        model.load_state_dict(load(os.path.join(case_dir, "model.pt")))
        opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.99), eps=1e-8, weight_decay=0)
        if how == "migrated":
            opt.load_state_dict(load(migrated))
            if len(opt.state) != len(list(model.parameters())):
                raise SystemExit(f"FAIL {migrated}: {len(opt.state)} parameters have state after loading")
        for x, y in data:
            ((model(x) - y) ** 2).mean().backward()
            opt.step()
            opt.zero_grad()
        distances[how] = math.sqrt(sum(float((p.detach() - ref[n]).pow(2).sum()) for n, p in model.named_parameters()))
    return distances


def main():
    case_dir, migrated = sys.argv[1], sys.argv[2]
    d = resume_distances(case_dir, migrated)
    print(f"torch.optim.AdamW (torch {torch.__version__.split('+')[0]}) resumed from {migrated}: "
          f"{d['migrated']:.3g} from the uninterrupted HeavyBall run after {CONTINUED} steps; fresh state "
          f"{d['fresh']:.3g}")
    if not d["migrated"] < d["fresh"] / 5:
        print("FAIL: the migrated state does not continue the run")
        sys.exit(1)


if __name__ == "__main__":
    main()
