"""Resume check for `optstate migrate --to heavyball3`, with real HeavyBall 3.x (by hand only:
CI cannot run HeavyBall; its figures go to BENCHMARKS.md and heavyball/migrate/resume.json).

Usage (torch 2.6 chroot): resume_heavyball3.py HEAVYBALL3_SRC FIXTURES MIGRATED OUT_JSON
  FIXTURES  testdata/heavyball/migrate (gen_heavyball_migrate.py's output)
  MIGRATED  a directory holding <version>/<case>.pt, what optstate migrate wrote from
            FIXTURES/<version>/<case>/optim.pt
For every legacy case: a fresh Net gets the saved model; the 3.x optimizer of the same
algorithm (heavyball.AdamW, heavyball.SOAP for case "soap") loads the migrated file; then
  visible   every parameter's 3.x state is the legacy entry that belonged to it (by the
            data_ptr in the fixture's manifest): AdamW's moments bit for bit; SOAP's
            exp_avg_sq, Q and GG bit for bit with 3.x's leading batch dimension, exp_avg equal
            to the legacy one projected into Q's eigenbasis (float64 einsum here)
  step 1    the first step's parameters differ from those of a fresh optimizer
  distance  after the CONTINUED steps of the same batches, ||params - old run's|| (L2 over all
            parameters) for: the migrated file, a reference conversion made here by hand from
            the legacy file, and fresh state; for SOAP also the hand conversion without the
            rotation of exp_avg (what a rename alone gives)
"""
import json
import math
import os
import sys
import warnings

import torch

warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_heavyball_migrate import CONTINUED, LR, SAVED, batches, model_for  # noqa: E402


def fresh_model(case_dir):
    m = model_for(os.path.basename(case_dir))
    m.load_state_dict(torch.load(os.path.join(case_dir, "model.pt"), weights_only=True))
    return m


def distance(model, ref):
    return math.sqrt(sum(float((p.detach() - ref[n]).pow(2).sum()) for n, p in model.named_parameters()))


def load_legacy(case_dir):
    """HeavyBall 1.x groups pickle their optimizer class, which 3.x no longer has: a stand-in
    class is enough to read the file (only its state is used)."""
    import heavyball
    missing = [n for n in ("ForeachAdamW", "ForeachSOAP") if not hasattr(heavyball, n)]
    for n in missing:
        setattr(heavyball, n, type(n, (), {}))
    try:
        return torch.load(os.path.join(case_dir, "optim.pt"), weights_only=False)
    finally:
        for n in missing:
            delattr(heavyball, n)


def legacy_views(case_dir, legacy, i, address_order=False):
    """Parameter i's entries, one per view: a split parameter's 0.x (data_ptr, shape) keys lie
    inside its bytes, in the order HeavyBall created them (its split order, kept by the state
    dict's insertion order: independent of optstate's own ordering); otherwise [legacy_entry]."""
    manifest = json.load(open(os.path.join(case_dir, "manifest.json")))["params"]
    p = manifest[i]
    nested = legacy["state"].get(i)
    if isinstance(nested, dict) and 0 in nested:  # 2.x: the views numbered already
        return [canonical(nested[v]) for v in sorted(nested)]
    end = p["data_ptr"] + 4 * math.prod(p["shape"])
    views = []
    for k, e in legacy["state"].items():
        ptr = k if isinstance(k, int) else k[0] if isinstance(k, tuple) and isinstance(k[0], int) else None
        if ptr is None or 0 in e or not p["data_ptr"] <= ptr < end:
            continue
        first = next(v for v in e.values() if isinstance(v, torch.Tensor))  # 0.12 keys a view by data_ptr alone
        if first.numel() < math.prod(p["shape"]):
            views.append((ptr, canonical(e)))
    if address_order:  # what optstate did before it knew HeavyBall's split order
        views.sort(key=lambda v: v[0])
    return [e for _, e in views] or [legacy_entry(case_dir, legacy, i)]


def legacy_entry(case_dir, legacy, i):
    """Parameter i's entry in a legacy file: 0.12 keys data_ptr, later 0.x (data_ptr, shape), through the manifest (the
    shape may be SOAP's merged view of the parameter); 1.x keys (Parameter copy, view) by the
    copy's bytes against the saved model."""
    manifest = json.load(open(os.path.join(case_dir, "manifest.json")))["params"]
    model = torch.load(os.path.join(case_dir, "model.pt"), weights_only=True)
    for key, entry in legacy["state"].items():
        if isinstance(key, int) and 0 in entry:  # 2.x: already indices, nested per view
            if key == i:
                return canonical(entry[0])
        elif isinstance(key, int) and key < len(manifest):  # 1.6: indices, flat entries
            if key == i:
                return canonical(entry)
        elif isinstance(key, int):  # 0.12: bare data_ptr
            if key == manifest[i]["data_ptr"]:
                return canonical(entry)
        elif isinstance(key[0], int):
            if key[0] == manifest[i]["data_ptr"] and math.prod(key[1]) == math.prod(manifest[i]["shape"]):
                return canonical(entry)
        elif key[1] == 0 and torch.equal(key[0].detach(), model[manifest[i]["name"]]):
            return canonical(entry)
    raise SystemExit(f"{case_dir}: no legacy entry for parameter {i}")


def canonical(entry):
    """Any era's entry as {exp_avg, exp_avg_sq[, Q, GG, projected]}: 0.x plain names (SOAP's
    exp_avg unprojected), 1.x update_by_adam_*, 2.x transform-indexed names (SOAP's projected)."""
    if "scale_by_soap_exp_avg_0" in entry:
        return {"exp_avg": entry["scale_by_soap_exp_avg_0"], "exp_avg_sq": entry["scale_by_soap_exp_avg_sq_0"],
                "Q": entry["scale_by_soap_Q_1"], "GG": entry["scale_by_soap_GG_1"], "projected": True}
    if "scale_by_soap_exp_avg" in entry:  # 1.x
        return {"exp_avg": entry["scale_by_soap_exp_avg"], "exp_avg_sq": entry["scale_by_soap_exp_avg_sq"],
                "Q": entry["Q"], "GG": entry["GG"], "projected": True}
    for m, v in (("exp_avg", "exp_avg_sq"), ("update_by_adam_exp_avg", "update_by_adam_exp_avg_sq"),
                 ("update_by_adam_exp_avg_0", "update_by_adam_exp_avg_sq_0")):
        if m in entry:
            out = {"exp_avg": entry[m], "exp_avg_sq": entry[v]}
            if "Q" in entry:
                out.update(Q=entry["Q"], GG=entry["GG"], projected=False)
            return out
    raise SystemExit(f"unknown legacy entry {sorted(entry)}")


def legacy_moments(entry):
    return entry["exp_avg"], entry["exp_avg_sq"]


def projected(x, Q):
    """HeavyBall's project(x, Q, back=False), in float64: x contracted with Q on every dim that has one."""
    y = x.double()
    for d, q in enumerate(Q):
        if isinstance(q, torch.Tensor) and q.numel() > 1:
            y = torch.tensordot(y, q.double(), dims=([d], [0])).movedim(-1, d)
    return y.float()


def soap_view(entry, rotate=True):
    m = projected(entry["exp_avg"], entry["Q"]) if rotate and not entry["projected"] else entry["exp_avg"]
    basis = [q[None] if isinstance(q, torch.Tensor) and q.numel() > 1 else None for q in entry["Q"]]
    gg = [g[None] if isinstance(g, torch.Tensor) and g.numel() > 1 else None for g in entry["GG"]]
    return {"is_initialized": {0, 2, 3}, "scale_by_soap_exp_avg_2": m[None],
            "scale_by_soap_exp_avg_sq_2": entry["exp_avg_sq"][None], "scale_by_soap_Q_3": basis,
            "scale_by_soap_GG_3": gg}


def soap_visible(st, entry):
    want = soap_view(entry)
    if not torch.allclose(st.get("scale_by_soap_exp_avg_2", torch.empty(0)), want["scale_by_soap_exp_avg_2"],
                          rtol=1e-5, atol=1e-9):
        return False
    for k in ("scale_by_soap_exp_avg_sq_2", "scale_by_soap_Q_3", "scale_by_soap_GG_3"):
        a, b = st.get(k), want[k]
        if isinstance(b, list):
            if not isinstance(a, list) or len(a) != len(b) or any(
                    (x is None) != (y is None) or (y is not None and not torch.equal(x, y)) for x, y in zip(a, b)):
                return False
        elif a is None or not torch.equal(a, b):
            return False
    return True


def adamw_visible(st, entry):
    em, ev = legacy_moments(entry)
    return torch.equal(st.get("update_by_adam_exp_avg_0", torch.empty(0)), em) and \
        torch.equal(st.get("update_by_adam_exp_avg_sq_0", torch.empty(0)), ev)


def reference_conversion(case_dir, steps, rotate=True, address_order=False):
    """By hand from the legacy file, parameter by parameter (legacy_entry)."""
    legacy = load_legacy(case_dir)
    n = len(json.load(open(os.path.join(case_dir, "manifest.json")))["params"])
    state = {}
    for i in range(n):
        views = legacy_views(case_dir, legacy, i, address_order)
        entry = views[0]
        if "Q" in entry:
            state[i] = {v: soap_view(e, rotate) for v, e in enumerate(views)}
        else:
            m, v = legacy_moments(entry)
            state[i] = {0: {"update_by_adam_exp_avg_0": m, "update_by_adam_exp_avg_sq_0": v, "is_initialized": {0}}}
    state[0][0]["step"] = torch.tensor(steps, dtype=torch.int64)
    return state


def make_optimizer(heavyball, case, params):
    if case == "soap_split":
        return heavyball.SOAP(params, lr=LR, split=True, max_precond_dim=32)
    return heavyball.SOAP(params, lr=LR) if case.startswith("soap") else heavyball.AdamW(params, lr=LR)


def run(heavyball, case_dir, load, data):
    model = fresh_model(case_dir)
    opt = make_optimizer(heavyball, os.path.basename(case_dir), model.parameters())
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
    figures = []
    for version in sorted(os.listdir(migrated_dir)):
        for name in sorted(os.listdir(os.path.join(migrated_dir, version))):
            case = name[:-3]
            data = batches(SAVED + CONTINUED, case)[SAVED:]
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
                views = legacy_views(case_dir, legacy, i)
                check = soap_visible if case.startswith("soap") else adamw_visible
                states = opt.state.get(p, {})
                visible += len(states) == len(views) and all(check(states.get(v, {}), e) for v, e in enumerate(views))
            model_m, _, first_m = run(heavyball, case_dir, load_migrated, data)

            def load_reference(state):
                def load(opt):
                    # The hand conversion takes the migrated file's groups and heavyball entry
                    # (hyperparameters, SOAP's schedule position): only the state is made here.
                    sd = torch.load(path, weights_only=True)
                    sd["state"] = state
                    opt.load_state_dict(sd)
                return load
            model_r, _, _ = run(heavyball, case_dir, load_reference(reference_conversion(case_dir, SAVED)), data)
            model_f, _, first_f = run(heavyball, case_dir, None, data)
            differs = any(not torch.equal(first_m[n], first_f[n]) for n in first_m)
            row = {"heavyball_from": version, "case": case, "heavyball_to": "3.2.0", "params": len(params),
                   "state_visible": visible, "first_step_differs_from_fresh": differs,
                   "distance_migrated": distance(model_m, ref), "distance_reference": distance(model_r, ref),
                   "distance_fresh": distance(model_f, ref), "continued_steps": CONTINUED}
            if case.startswith("soap") and version.startswith("0."):  # 0.x kept exp_avg unprojected
                model_u, _, _ = run(heavyball, case_dir,
                                    load_reference(reference_conversion(case_dir, SAVED, rotate=False)), data)
                d = distance(model_u, ref)
                row["distance_unrotated_exp_avg"] = d if math.isfinite(d) else None  # null: diverged
            if case.endswith("_split") and version.startswith("0."):  # views keyed by pointer
                model_a, _, _ = run(heavyball, case_dir,
                                    load_reference(reference_conversion(case_dir, SAVED, address_order=True)), data)
                d = distance(model_a, ref)
                row["distance_views_in_address_order"] = d if math.isfinite(d) else None
            figures.append(row)
            print(json.dumps(row))
    with open(out, "w") as f:
        json.dump({"resume": figures}, f, indent=1)


if __name__ == "__main__":
    main()
