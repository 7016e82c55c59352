"""optstate migrate --to heavyball3 output checked by torch 2.6.

Usage (torch 2.6): check_heavyball_migrate.py FIXTURES SCRATCH
  FIXTURES  testdata/heavyball/migrate: {0.24.4,1.4.0}/<case>/{optim.pt,manifest.json,model.pt}
            (legacy input), 3.2.0/adamw/optim.pt (what real HeavyBall 3.2.0 saved for the same model)
  SCRATCH   <version>/<case>.pt, what optstate migrate wrote
1. Each output loads with weights_only=True.
2. Its layout is 3.2.0's: the same state keys, each {0: {...}} with the same names per
   parameter (`step` only where 3.2.0 has it), is_initialized {0}, param_groups with the same
   fields, the `heavyball` entry with 3.2.0's fields but `precond_schedule` (a pickle).
3. Its values are the legacy ones: every moment bit for bit from the entry the manifest's
   data_ptr names (0.x) or whose Parameter copy has the saved model's bytes (1.x), the step
   counter 3, the legacy lr / betas / eps.
"""
import json
import os
import sys
import types

import torch


def load_legacy(path):
    """HeavyBall 1.x groups pickle heavyball.ForeachAdamW; HeavyBall is not installed here (never
    vendored), so a stand-in module is enough to read the file's state."""
    if "heavyball" not in sys.modules:
        stub = types.ModuleType("heavyball")
        stub.ForeachAdamW = type("ForeachAdamW", (), {})
        sys.modules["heavyball"] = stub
    return torch.load(path, weights_only=False)


def legacy_moments(fixtures, version, case, legacy, manifest, i):
    """Parameter i's moments: 0.x by (data_ptr, shape), 1.x by its (Parameter copy, 0) key's bytes."""
    if version.startswith("0."):
        e = legacy["state"][(manifest[i]["data_ptr"], tuple(manifest[i]["shape"]))]
        return e["exp_avg"], e["exp_avg_sq"]
    model = torch.load(os.path.join(fixtures, version, case, "model.pt"), weights_only=True)
    for (param, view), e in legacy["state"].items():
        if view == 0 and torch.equal(param.detach(), model[manifest[i]["name"]]):
            return e["update_by_adam_exp_avg"], e["update_by_adam_exp_avg_sq"]
    fail(f"{version}/{case}: no legacy entry for {manifest[i]['name']}")


def fail(msg):
    print("FAIL", msg)
    sys.exit(1)


def main():
    fixtures, scratch = sys.argv[1], sys.argv[2]
    golden = torch.load(os.path.join(fixtures, "3.2.0", "adamw", "optim.pt"), weights_only=True)
    checked = 0
    for version, case in [(v, c) for v in ("0.24.4", "1.4.0") for c in ("adamw_foreach", "adamw_perparam")]:
        out = torch.load(os.path.join(scratch, version, f"{case}.pt"), weights_only=True)
        legacy = load_legacy(os.path.join(fixtures, version, case, "optim.pt"))
        manifest = json.load(open(os.path.join(fixtures, version, case, "manifest.json")))["params"]
        case = f"{version}/{case}"
        if set(out) != set(golden):
            fail(f"{case}: top-level keys {sorted(out)}, 3.2.0 has {sorted(golden)}")
        if sorted(out["state"]) != sorted(golden["state"]):
            fail(f"{case}: state keys {sorted(out['state'])}")
        for i, entry in golden["state"].items():
            mine = out["state"][i]
            if set(mine) != set(entry) or set(mine[0]) != set(entry[0]):
                fail(f"{case}: state[{i}] is {mine.keys()} / {sorted(mine[0])}, 3.2.0 has {sorted(entry[0])}")
            if mine[0]["is_initialized"] != entry[0]["is_initialized"]:
                fail(f"{case}: state[{i}] is_initialized {mine[0]['is_initialized']}")
            em, ev = legacy_moments(fixtures, version, case.split("/")[1], legacy, manifest, i)
            if not torch.equal(mine[0]["update_by_adam_exp_avg_0"], em) or \
                    not torch.equal(mine[0]["update_by_adam_exp_avg_sq_0"], ev):
                fail(f"{case}: state[{i}] moments are not the legacy entry of {manifest[i]['name']}")
            checked += 1
        if int(out["state"][0][0]["step"]) != 3:
            fail(f"{case}: step {out['state'][0][0]['step']}")
        ours, theirs = out["param_groups"][0], golden["param_groups"][0]
        if set(ours) != set(theirs):
            fail(f"{case}: param_groups fields differ: only ours {sorted(set(ours) - set(theirs))}, "
                 f"only 3.2.0 {sorted(set(theirs) - set(ours))}")
        lg = legacy["param_groups"][0]
        for k in ("lr", "betas", "eps", "weight_decay", "warmup_steps", "caution", "mars", "storage_dtype"):
            if isinstance(lg[k], object) and type(lg[k]) is object:
                continue  # a 1.x default sentinel
            if ours[k] != lg[k]:
                fail(f"{case}: group {k} = {ours[k]!r}, the legacy file has {lg[k]!r}")
        if ours["multi_tensor"] != lg["foreach"] or ours["params"] != list(range(len(manifest))):
            fail(f"{case}: multi_tensor {ours['multi_tensor']} / params {ours['params']}")
        if set(out["heavyball"]) != set(golden["heavyball"]) - {"precond_schedule"}:
            fail(f"{case}: heavyball entry {sorted(out['heavyball'])}")
    print(f"ok: {checked} parameters' state migrated as HeavyBall 3.2.0 lays it out, values the legacy ones, "
          "loadable with weights_only=True")
    resume_in_torch(fixtures, scratch)


def resume_in_torch(fixtures, scratch):
    """--to torch: torch.optim.AdamW loads the file and continues the old run closer than fresh state."""
    import math
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                    "testdata", "gen"))
    from gen_heavyball_migrate import CONTINUED, LR, SAVED, Net, batches
    data = batches(SAVED + CONTINUED)[SAVED:]
    for version in ("0.24.4", "1.4.0"):
        case_dir = os.path.join(fixtures, version, "adamw_foreach")
        ref = torch.load(os.path.join(case_dir, "model.continued.pt"), weights_only=True)
        distances = {}
        for how in ("migrated", "fresh"):
            model = Net()
            model.load_state_dict(torch.load(os.path.join(case_dir, "model.pt"), weights_only=True))
            opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.99), eps=1e-8, weight_decay=0)
            if how == "migrated":
                sd = torch.load(os.path.join(scratch, "torch", f"{version}.pt"), weights_only=True)
                opt.load_state_dict(sd)
                if len(opt.state) != len(list(model.parameters())):
                    fail(f"torch {version}: {len(opt.state)} parameters have state after loading")
            for x, y in data:
                ((model(x) - y) ** 2).mean().backward()
                opt.step()
                opt.zero_grad()
            distances[how] = math.sqrt(sum(float((p.detach() - ref[n]).pow(2).sum()) for n, p in model.named_parameters()))
        print(f"torch.optim.AdamW resume from {version}: distance to the old run migrated "
              f"{distances['migrated']:.3g}, fresh {distances['fresh']:.3g}")
        if not distances["migrated"] < distances["fresh"] / 5:
            fail(f"torch {version}: the migrated state does not continue the run ({distances})")
    print("ok: --to torch files resume in torch.optim.AdamW closer to the old run than fresh state")


if __name__ == "__main__":
    main()
