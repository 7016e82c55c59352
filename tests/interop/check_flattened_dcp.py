"""consolidate of a DCP checkpoint in torchtitan's layout (the optimizer flattened by torch's DSD),
checked by torch 2.6.

Usage (torch 2.6): check_flattened_dcp.py FIXTURES SCRATCH
  FIXTURES  testdata/frameworks/torchtitan_layout_torch26 (gen_flattened_dcp.py)
  SCRATCH   flattened.fqn.pt and flattened.index.pt: `optstate consolidate` (--to fqn, --to index)
The --to fqn optimizer equals DSD's own nested layout of the same state (flattened_dcp.expected.pt)
value for value, and set_optimizer_state_dict takes it; the --to index optimizer loads into a
plain torch.optim.AdamW over the model with every parameter's state equal to DSD's for its name.
"""
import os
import sys

import torch
from torch.distributed.checkpoint.state_dict import set_optimizer_state_dict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "testdata", "gen"))
from gen_flattened_dcp import net  # noqa: E402


def same(a, b):
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


def main():
    fixtures, scratch = sys.argv[1], sys.argv[2]
    # One process, no process group: DSD and dcp.load work without one, and a gloo group
    # here hung about one run in three (a futex wait after init, never reproduced without it).
    torch.set_num_threads(1)
    want = torch.load(os.path.join(fixtures, "flattened_dcp.expected.pt"), weights_only=True)["optimizer"]
    fqn = torch.load(os.path.join(scratch, "flattened.fqn.pt"), weights_only=False)
    if not same(dict(fqn["optimizer"]["state"]), dict(want["state"])):
        raise SystemExit("FAIL --to fqn: state differs from DSD's nested layout")
    got_groups = [{k: v for k, v in g.items()} for g in fqn["optimizer"]["param_groups"]]
    if not same(got_groups, want["param_groups"]):
        raise SystemExit(f"FAIL --to fqn: param_groups {got_groups} != {want['param_groups']}")
    model = net()
    model.load_state_dict({k: v for k, v in fqn.items() if isinstance(v, torch.Tensor)})
    opt = torch.optim.AdamW(model.parameters(), lr=1.0)
    set_optimizer_state_dict(model, opt, fqn["optimizer"])
    names = [n for n, _ in model.named_parameters()]
    index = torch.load(os.path.join(scratch, "flattened.index.pt"), weights_only=False)
    plain = torch.optim.AdamW(net().parameters(), lr=1.0)
    plain.load_state_dict(index["optimizer"])
    for p_dsd, p_plain, name in zip(model.parameters(), plain.param_groups[0]["params"], names):
        for field in ("exp_avg", "exp_avg_sq", "step"):
            if not torch.equal(opt.state[p_dsd][field], want["state"][name][field]) or \
                    not torch.equal(plain.state[p_plain][field], want["state"][name][field]):
                raise SystemExit(f"FAIL {name}.{field} differs after loading")
    if plain.param_groups[0]["lr"] != want["param_groups"][0]["lr"]:
        raise SystemExit("FAIL --to index: lr is not the file's")
    print(f"ok: torchtitan layout: consolidate --to fqn == DSD's nested state ({len(names)} parameters), "
          "set_optimizer_state_dict takes it, --to index loads into torch.optim.AdamW")
    return 0


if __name__ == "__main__":
    sys.exit(main())
