"""remap --to fqn of several-group and frozen-parameter checkpoints, without a manifest, loaded by
torch 2.6's set_optimizer_state_dict into the optimizer the training script builds.

Usage (torch 2.6): check_param_groups.py FIXTURES SCRATCH
  FIXTURES  testdata/frameworks/groups_torch26 (gen_param_groups.py)
  SCRATCH   <case>.fqn.pt, what `optstate remap --to fqn` wrote for each (no --manifest)
For each case the groups and their order are the generator's (same model, same grouping rule),
every trained parameter's state equals the original file's entry for it bit for bit, and the
frozen ones get none.
"""
import os
import sys

import torch
from torch.distributed.checkpoint.state_dict import set_optimizer_state_dict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "testdata", "gen"))
from gen_param_groups import cases  # noqa: E402


def main():
    fixtures, scratch = sys.argv[1], sys.argv[2]
    # One process, no process group: DSD and dcp.load work without one, and a gloo group
    # here hung about one run in three (a futex wait after init, never reproduced without it).
    torch.set_num_threads(1)
    checked = 0
    for name, model, opt, _ in cases():
        path = os.path.join(scratch, f"{name}.fqn.pt")
        if not os.path.exists(path):
            continue  # refused by design (frozen_ambiguous): a golden CLI case checks the refusal
        original = torch.load(os.path.join(fixtures, f"{name}.pt"), weights_only=True)["optimizer"]
        osd = torch.load(path, weights_only=True)["optimizer"]
        set_optimizer_state_dict(model, opt, osd)
        index = 0
        for gi, group in enumerate(opt.param_groups):
            if group["weight_decay"] != original["param_groups"][gi]["weight_decay"]:
                raise SystemExit(f"FAIL {name}: group {gi} weight_decay {group['weight_decay']}")
            for p in group["params"]:
                for field, want in original["state"][index].items():
                    if not torch.equal(opt.state[p][field], want):
                        raise SystemExit(f"FAIL {name}: parameter {index} (group {gi}) {field} differs")
                index += 1
        frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
        if any(p in opt.state for p in model.parameters() if not p.requires_grad):
            raise SystemExit(f"FAIL {name}: a frozen parameter got state")
        print(f"ok: {name}: {len(opt.param_groups)} groups, {index} parameters on their own state, frozen {frozen}")
        checked += 1
    if checked != 6:
        raise SystemExit(f"FAIL: {checked} cases checked, expected 6")
    return 0


if __name__ == "__main__":
    sys.exit(main())
