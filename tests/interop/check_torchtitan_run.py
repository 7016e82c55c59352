"""consolidate of checkpoints torchtitan's own CheckpointManager wrote, checked by torch 2.6.

Usage (torch 2.6): check_torchtitan_run.py FIXTURES SCRATCH
  FIXTURES  testdata/frameworks/torchtitan_0.1.0 (gen_torchtitan_run.py: torchtitan v0.1.0, FSDP2, 2 ranks)
  SCRATCH   titan.fqn.pt and titan.index.pt: `optstate consolidate` (--to fqn, --to index) of
            run/checkpoint/step-6
The --to fqn file holds DSD's full nested optimizer state (truth.pt, gathered by the run itself) value
for value and every model tensor bit for bit; the --to index optimizer loads into a plain
torch.optim.AdamW over parameters of the model's shapes in param_groups' order, each parameter's
state equal to the truth for its name; lr is the schedule's last (0), train_state's step is 6.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_flattened_dcp import same  # noqa: E402


def main():
    fixtures, scratch = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    truth = torch.load(os.path.join(fixtures, "truth.pt"), weights_only=True)
    want = truth["optimizer"]
    fqn = torch.load(os.path.join(scratch, "titan.fqn.pt"), weights_only=True)
    # Fields in .metadata's order (exp_avg, exp_avg_sq, step, as dcp_to_torch_save gives them);
    # fused AdamW made `step` first in the live state: the order of a state entry's keys means nothing.
    got = fqn["optimizer"]["state"]
    if list(got) != list(want["state"]):
        raise SystemExit(f"FAIL --to fqn: state names {list(got)} != {list(want['state'])}")
    for name, fields in want["state"].items():
        if sorted(got[name]) != sorted(fields) or not all(same(got[name][f], v) for f, v in fields.items()):
            raise SystemExit(f"FAIL --to fqn: optimizer state of {name} differs from DSD's full state of the run")
    if not same(fqn["optimizer"]["param_groups"], want["param_groups"]):
        raise SystemExit(f"FAIL --to fqn: param_groups {fqn['optimizer']['param_groups']} != {want['param_groups']}")
    for name, t in truth["model"].items():
        if not torch.equal(fqn["model"][name], t):
            raise SystemExit(f"FAIL --to fqn: model.{name} differs from the run's full tensor")
    if fqn["train_state"]["step"] != 6:
        raise SystemExit(f"FAIL train_state {fqn['train_state']}")
    index = torch.load(os.path.join(scratch, "titan.index.pt"), weights_only=True)
    names = want["param_groups"][0]["params"]
    params = [torch.nn.Parameter(torch.zeros_like(truth["model"][n])) for n in names]
    plain = torch.optim.AdamW(params, lr=1.0)
    plain.load_state_dict(index["optimizer"])
    for p, name in zip(plain.param_groups[0]["params"], names):
        for field in ("exp_avg", "exp_avg_sq", "step"):
            if not torch.equal(plain.state[p][field], want["state"][name][field]):
                raise SystemExit(f"FAIL --to index: {name}.{field} differs after load_state_dict")
    if plain.param_groups[0]["lr"] != 0.0 or want["param_groups"][0]["lr"] != 0.0:
        raise SystemExit(f"FAIL lr {plain.param_groups[0]['lr']}: the schedule ends at 0")
    print(f"ok: torchtitan v0.1.0 run: consolidate --to fqn == the run's full DSD state ({len(names)} parameters, "
          f"{len(truth['model'])} model tensors), --to index loads into torch.optim.AdamW")
    return 0


if __name__ == "__main__":
    sys.exit(main())
