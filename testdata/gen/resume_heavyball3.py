"""Resume check for `optstate migrate --to heavyball3`, with real HeavyBall 3.x (session only:
CI cannot run HeavyBall; its figures go to BENCHMARKS.md and heavyball/migrate/resume.json).

Usage (torch 2.6 chroot): resume_heavyball3.py HEAVYBALL3_SRC FIXTURES MIGRATED OUT_JSON
  FIXTURES  testdata/heavyball/migrate (gen_heavyball_migrate.py's output)
  MIGRATED  a directory holding <version>/<case>.pt, what optstate migrate wrote from
            FIXTURES/<version>/<case>/optim.pt
For every legacy case: a fresh Net gets the saved model; heavyball.AdamW (3.x) loads the
migrated file; then
  visible   every parameter's 3.x state (update_by_adam_exp_avg_0/_sq_0) is exactly the
            legacy entry that belonged to it (by the data_ptr in the fixture's manifest)
  step 1    the first step's parameters differ from those of a fresh optimizer
  distance  after the CONTINUED steps of the same batches, ||params - old run's|| (L2 over all
            parameters) for: the migrated file, a reference conversion made here by hand from
            the legacy file, and fresh state
"""
import json
import math
import os
import sys
import warnings

import torch

warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_heavyball_migrate import CONTINUED, LR, SAVED, Net, batches  # noqa: E402


def fresh_model(case_dir):
    m = Net()
    m.load_state_dict(torch.load(os.path.join(case_dir, "model.pt"), weights_only=True))
    return m


def distance(model, ref):
    return math.sqrt(sum(float((p.detach() - ref[n]).pow(2).sum()) for n, p in model.named_parameters()))


def reference_conversion(case_dir, steps):
    """By hand from the legacy file: (ptr, shape) keys to indices through the manifest."""
    legacy = torch.load(os.path.join(case_dir, "optim.pt"), weights_only=False)
    manifest = json.load(open(os.path.join(case_dir, "manifest.json")))["params"]
    index = {(p["data_ptr"], tuple(p["shape"])): i for i, p in enumerate(manifest)}
    state = {}
    for (ptr, shape), entry in legacy["state"].items():
        i = index[(ptr, tuple(shape))]
        state[i] = {0: {"update_by_adam_exp_avg_0": entry["exp_avg"], "update_by_adam_exp_avg_sq_0": entry["exp_avg_sq"],
                        "is_initialized": {0}}}
    state[0][0]["step"] = torch.tensor(steps, dtype=torch.int64)
    return state


def run(heavyball, case_dir, load, data):
    model = fresh_model(case_dir)
    opt = heavyball.AdamW(model.parameters(), lr=LR)
    if load is not None:
        load(opt)
    firsts = None
    for i, (x, y) in enumerate(data):
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
        opt.zero_grad()
        if i == 0:
            firsts = {n: p.detach().clone() for n, p in model.named_parameters()}
    return model, opt, firsts


def main():
    src, fixtures, migrated_dir, out = sys.argv[1:5]
    sys.path.insert(0, src)
    import heavyball
    import heavyball.utils
    heavyball.utils.compile_mode = None
    data = batches(SAVED + CONTINUED)[SAVED:]
    figures = []
    for version in sorted(os.listdir(migrated_dir)):
        for name in sorted(os.listdir(os.path.join(migrated_dir, version))):
            case = name[:-3]
            case_dir = os.path.join(fixtures, version, case)
            path = os.path.join(migrated_dir, version, name)
            ref = torch.load(os.path.join(case_dir, "model.continued.pt"), weights_only=True)
            legacy = torch.load(os.path.join(case_dir, "optim.pt"), weights_only=False)
            manifest = json.load(open(os.path.join(case_dir, "manifest.json")))["params"]

            def load_migrated(opt):
                opt.load_state_dict(torch.load(path, weights_only=True))
            model, opt, first_migrated = run(heavyball, case_dir, None, [])
            load_migrated(opt)
            params = list(model.parameters())
            visible = 0
            for i, p in enumerate(params):
                entry = legacy["state"][(manifest[i]["data_ptr"], tuple(manifest[i]["shape"]))]
                st = opt.state.get(p, {}).get(0, {})
                if torch.equal(st.get("update_by_adam_exp_avg_0", torch.empty(0)), entry["exp_avg"]) and \
                        torch.equal(st.get("update_by_adam_exp_avg_sq_0", torch.empty(0)), entry["exp_avg_sq"]):
                    visible += 1
            steps = 3 if "step" not in legacy["param_groups"][0] else None
            model_m, _, first_m = run(heavyball, case_dir, load_migrated, data)
            state = reference_conversion(case_dir, SAVED)

            def load_reference(opt):
                sd = opt.state_dict()
                sd["state"] = state
                opt.load_state_dict(sd)
            model_r, _, _ = run(heavyball, case_dir, load_reference, data)
            model_f, _, first_f = run(heavyball, case_dir, None, data)
            differs = any(not torch.equal(first_m[n], first_f[n]) for n in first_m)
            row = {"heavyball_from": version, "case": case, "heavyball_to": "3.2.0", "params": len(params),
                   "state_visible": visible, "first_step_differs_from_fresh": differs,
                   "distance_migrated": distance(model_m, ref), "distance_reference": distance(model_r, ref),
                   "distance_fresh": distance(model_f, ref), "continued_steps": CONTINUED}
            del steps
            figures.append(row)
            print(json.dumps(row))
    with open(out, "w") as f:
        json.dump({"resume": figures}, f, indent=1)


if __name__ == "__main__":
    main()
