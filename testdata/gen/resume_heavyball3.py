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


def load_legacy(case_dir):
    """HeavyBall 1.x groups pickle their optimizer class, which 3.x no longer has: a stand-in
    class is enough to read the file (only its state is used)."""
    import heavyball
    missing = not hasattr(heavyball, "ForeachAdamW")
    if missing:
        heavyball.ForeachAdamW = type("ForeachAdamW", (), {})
    try:
        return torch.load(os.path.join(case_dir, "optim.pt"), weights_only=False)
    finally:
        if missing:
            del heavyball.ForeachAdamW


def legacy_moments(case_dir, legacy, i):
    """Parameter i's (exp_avg, exp_avg_sq) in a legacy file: 0.x keys (data_ptr, shape) through
    the manifest; 1.x keys (Parameter copy, view) by the copy's bytes against the saved model."""
    manifest = json.load(open(os.path.join(case_dir, "manifest.json")))["params"]
    model = torch.load(os.path.join(case_dir, "model.pt"), weights_only=True)
    for key, entry in legacy["state"].items():
        if isinstance(key[0], int):
            if (key[0], tuple(key[1])) != (manifest[i]["data_ptr"], tuple(manifest[i]["shape"])):
                continue
            return entry["exp_avg"], entry["exp_avg_sq"]
        if key[1] == 0 and torch.equal(key[0].detach(), model[manifest[i]["name"]]):
            return entry["update_by_adam_exp_avg"], entry["update_by_adam_exp_avg_sq"]
    raise SystemExit(f"{case_dir}: no legacy entry for parameter {i}")


def reference_conversion(case_dir, steps):
    """By hand from the legacy file, parameter by parameter (legacy_moments)."""
    legacy = load_legacy(case_dir)
    n = len(json.load(open(os.path.join(case_dir, "manifest.json")))["params"])
    state = {}
    for i in range(n):
        m, v = legacy_moments(case_dir, legacy, i)
        state[i] = {0: {"update_by_adam_exp_avg_0": m, "update_by_adam_exp_avg_sq_0": v, "is_initialized": {0}}}
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
            legacy = load_legacy(case_dir)

            def load_migrated(opt):
                opt.load_state_dict(torch.load(path, weights_only=True))
            model, opt, first_migrated = run(heavyball, case_dir, None, [])
            load_migrated(opt)
            params = list(model.parameters())
            visible = 0
            for i, p in enumerate(params):
                em, ev = legacy_moments(case_dir, legacy, i)
                st = opt.state.get(p, {}).get(0, {})
                if torch.equal(st.get("update_by_adam_exp_avg_0", torch.empty(0)), em) and \
                        torch.equal(st.get("update_by_adam_exp_avg_sq_0", torch.empty(0)), ev):
                    visible += 1
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
            figures.append(row)
            print(json.dumps(row))
    with open(out, "w") as f:
        json.dump({"resume": figures}, f, indent=1)


if __name__ == "__main__":
    main()
