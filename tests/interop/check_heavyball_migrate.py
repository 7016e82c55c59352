"""optstate migrate --to heavyball3 output checked by torch 2.6.

Usage (torch 2.6): check_heavyball_migrate.py FIXTURES SCRATCH
  FIXTURES  testdata/heavyball/migrate: {0.24.4,1.4.0}/<case>/{optim.pt,manifest.json,model.pt}
            (legacy input), 3.2.0/{adamw,soap,soap_conv}/optim.pt (what real HeavyBall 3.2.0
            saved for the same model with the same algorithm)
  SCRATCH   <version>/<case>.pt, what optstate migrate wrote
1. Each output loads with weights_only=True.
2. Its layout is 3.2.0's: the same state keys, each {0: {...}} with the same names per
   parameter (`step` only where 3.2.0 has it, of the same type), the same is_initialized,
   SOAP's tensors with 3.2.0's shapes (leading batch dim, None where 3.2.0 has None),
   param_groups with the same fields, the `heavyball` entry with 3.2.0's fields (AdamW's
   without `precond_schedule`, a pickle 3.x falls back from).
3. Its values are the legacy ones: every AdamW moment bit for bit from the entry the
   manifest's data_ptr names (0.x) or whose Parameter copy has the saved model's bytes (1.x);
   SOAP's exp_avg_sq, Q and GG bit for bit, its exp_avg the legacy one projected into Q's
   eigenbasis (float64 here); the step counter 3; the legacy lr / betas / eps; SOAP's
   precondition_frequency as 3.x's pickled schedule.
"""
import math
import pickle
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
        stub.ForeachSOAP = type("ForeachSOAP", (), {})
        sys.modules["heavyball"] = stub
    return torch.load(path, weights_only=False)


def legacy_entry_0x(legacy, manifest, i):
    """0.x: the entry keyed by the parameter's data_ptr (0.12) or by it and its shape or SOAP's merged
    view of it (later 0.x)."""
    for key, e in legacy["state"].items():
        if isinstance(key, int):
            if key == manifest[i]["data_ptr"]:
                return e
        elif key[0] == manifest[i]["data_ptr"] and math.prod(key[1]) == math.prod(manifest[i]["shape"]):
            return e
    fail(f"no legacy entry for {manifest[i]['name']}")


def legacy_split_views(legacy, manifest, i):
    """0.x split views of parameter i: the keys whose pointer lies in its bytes ((data_ptr, shape)
    in 0.24.4, data_ptr alone in 0.12), in the state dict's order."""
    start = manifest[i]["data_ptr"]
    end = start + 4 * math.prod(manifest[i]["shape"])
    out = []
    for k, e in legacy["state"].items():
        ptr = k if isinstance(k, int) else k[0]
        if start <= ptr < end:
            out.append(e)
    return out


def legacy_entry_2x(legacy, i, view=0):
    """2.x: index keys, nested per view; SOAP's names as {exp_avg, exp_avg_sq, Q, GG} (projected)."""
    e = legacy["state"][i][view]
    if "scale_by_soap_exp_avg_0" in e:
        return {"exp_avg": e["scale_by_soap_exp_avg_0"], "exp_avg_sq": e["scale_by_soap_exp_avg_sq_0"],
                "Q": e["scale_by_soap_Q_1"], "GG": e["scale_by_soap_GG_1"], "projected": True}
    return {"exp_avg": e["update_by_adam_exp_avg_0"], "exp_avg_sq": e["update_by_adam_exp_avg_sq_0"]}


def legacy_moments(fixtures, version, case, legacy, manifest, i):
    """Parameter i's moments: 0.x by (data_ptr, shape), 1.x by its (Parameter copy, 0) key's bytes,
    2.x by index."""
    if version.startswith("2."):
        e = legacy_entry_2x(legacy, i)
        return e["exp_avg"], e["exp_avg_sq"]
    if version.startswith("0."):
        e = legacy_entry_0x(legacy, manifest, i)
        return e["exp_avg"], e["exp_avg_sq"]
    e = legacy_entry_1x(fixtures, version, case, legacy, manifest, i)
    return e["update_by_adam_exp_avg"], e["update_by_adam_exp_avg_sq"]


def legacy_entry_1x(fixtures, version, case, legacy, manifest, i):
    """1.x: the entry whose (Parameter copy, 0) key has the saved model's bytes; 1.6 keys by index."""
    if version.startswith("1.6"):  # index keys, flat entries
        return legacy["state"][i]
    model = torch.load(os.path.join(fixtures, version, case, "model.pt"), weights_only=True)
    for (param, view), e in legacy["state"].items():
        if view == 0 and torch.equal(param.detach(), model[manifest[i]["name"]]):
            return e
    fail(f"{version}/{case}: no legacy entry for {manifest[i]['name']}")


def fail(msg):
    print("FAIL", msg)
    sys.exit(1)


def projected(x, Q):
    """HeavyBall's project(x, Q, back=False) in float64: x contracted with Q on every dim that has one."""
    y = x.double()
    for d, q in enumerate(Q):
        if isinstance(q, torch.Tensor) and q.numel() > 1:
            y = torch.tensordot(y, q.double(), dims=([d], [0])).movedim(-1, d)
    return y


def check_soap_entry(case, i, mine, legacy_entry, golden_view):
    for k, v in golden_view.items():
        if isinstance(v, torch.Tensor) and k != "step" and mine[k].shape != v.shape:
            fail(f"{case}: state[{i}] {k} has shape {list(mine[k].shape)}, 3.2.0 {list(v.shape)}")
        if isinstance(v, list) and [None if x is None else list(x.shape) for x in mine[k]] != \
                [None if x is None else list(x.shape) for x in v]:
            fail(f"{case}: state[{i}] {k} is not laid out as 3.2.0's")
    if not torch.equal(mine["scale_by_soap_exp_avg_sq_2"][0], legacy_entry["exp_avg_sq"]):
        fail(f"{case}: state[{i}] exp_avg_sq is not the legacy one")
    for name, legacy_name in (("scale_by_soap_Q_3", "Q"), ("scale_by_soap_GG_3", "GG")):
        for ours, theirs in zip(mine[name], legacy_entry[legacy_name]):
            if (ours is None) != (not isinstance(theirs, torch.Tensor) or theirs.numel() <= 1) or \
                    (ours is not None and not torch.equal(ours[0], theirs)):
                fail(f"{case}: state[{i}] {name} is not the legacy {legacy_name}")
    if legacy_entry.get("projected"):  # 2.x: already in the eigenbasis, moved bit for bit
        if not torch.equal(mine["scale_by_soap_exp_avg_2"][0], legacy_entry["exp_avg"]):
            fail(f"{case}: state[{i}] exp_avg is not the legacy one")
        return
    want = projected(legacy_entry["exp_avg"], legacy_entry["Q"])
    got = mine["scale_by_soap_exp_avg_2"][0].double()
    err = float((got - want).abs().max())
    if err > 1e-6 * float(want.abs().max()) + 1e-12:
        fail(f"{case}: state[{i}] exp_avg is not the legacy one in Q's eigenbasis (max error {err:.3g})")


def main():
    fixtures, scratch = sys.argv[1], sys.argv[2]
    checked = 0
    cases = [(v, c) for v in ("0.21.8", "0.24.4", "1.4.0", "1.6.3") for c in ("adamw_foreach", "adamw_perparam")]
    cases += [("0.24.4", "soap"), ("0.24.4", "soap_conv"), ("0.12.1", "adamw"), ("0.12.1", "soap"), ("0.21.8", "soap")]
    cases += [("0.24.4", "soap_split"), ("0.12.1", "soap_split"), ("2.3.1", "soap_split")]
    cases += [("2.3.1", c) for c in ("adamw_foreach", "adamw_perparam", "soap")] + [("1.4.0", "soap"), ("1.6.3", "soap")]
    for version, case in cases:
        soap = case.startswith("soap")
        golden = torch.load(os.path.join(fixtures, "3.2.0", case if soap else "adamw", "optim.pt"), weights_only=True)
        # (3.2.0's soap_split golden: the same split, each view {1, 32, 32} or {1, 32}.)
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
            if "step" in entry[0] and (type(mine[0]["step"]) is not type(entry[0]["step"]) or
                                       mine[0]["step"].dtype != entry[0]["step"].dtype):
                fail(f"{case}: state[{i}] step is {mine[0]['step']!r}, 3.2.0 saves {entry[0]['step']!r}")
            if soap:
                if version.startswith("2.") and not case.endswith("soap_split"):
                    le = legacy_entry_2x(legacy, i)
                elif version.startswith("1."):
                    e = legacy_entry_1x(fixtures, version, case.split("/")[1], legacy, manifest, i)
                    le = {"exp_avg": e["scale_by_soap_exp_avg"], "exp_avg_sq": e["scale_by_soap_exp_avg_sq"],
                          "Q": e["Q"], "GG": e["GG"], "projected": True}
                elif case.endswith("soap_split"):
                    # One legacy entry per view, in the order HeavyBall created them (the state
                    # dict's insertion order; 2.x numbered them), which is 3.x's view numbering.
                    if version.startswith("2."):
                        views = [legacy_entry_2x(legacy, i, v) for v in sorted(legacy["state"][i])]
                    else:
                        views = legacy_split_views(legacy, manifest, i)
                    if sorted(mine) != list(range(len(views))) or sorted(entry) != sorted(mine):
                        fail(f"{case}: state[{i}] has views {sorted(mine)}, 3.2.0 {sorted(entry)}, "
                             f"the legacy file {len(views)}")
                    for v, le in enumerate(views):
                        check_soap_entry(f"{case} view {v}", i, mine[v], le, entry[v])
                    checked += 1
                    continue
                else:
                    le = legacy_entry_0x(legacy, manifest, i)
                check_soap_entry(case, i, mine[0], le, entry[0])
                checked += 1
                continue
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
        fields = ("lr", "betas", "eps", "weight_decay", "warmup_steps", "caution", "mars")
        fields += ("shampoo_beta", "max_precond_dim", "merge_dims", "precondition_1d", "split") if soap \
            else ("storage_dtype",)
        for k in fields:
            if k not in lg:  # an older HeavyBall had no such field: 3.2's default, as 3.2.0 saved it
                if ours[k] != theirs[k]:
                    fail(f"{case}: group {k} = {ours[k]!r}, absent from the legacy file, 3.2.0's is {theirs[k]!r}")
                continue
            if isinstance(lg[k], object) and type(lg[k]) is object:
                continue  # a 1.x default sentinel
            if ours[k] != lg[k]:
                fail(f"{case}: group {k} = {ours[k]!r}, the legacy file has {lg[k]!r}")
        if ours["multi_tensor"] != lg.get("foreach", True) or ours["params"] != list(range(len(manifest))):
            fail(f"{case}: multi_tensor {ours['multi_tensor']} / params {ours['params']}")
        if set(out["heavyball"]) != set(golden["heavyball"]):
            fail(f"{case}: heavyball entry {sorted(out['heavyball'])}")
        if not soap and out["heavyball"]["precond_schedule"] != golden["heavyball"]["precond_schedule"]:
            fail(f"{case}: AdamW's precond_schedule {out['heavyball']['precond_schedule']!r}")
        if soap and version.startswith("2."):
            want = legacy["heavyball"]
            if out["heavyball"]["precond_schedule"] != want["precond_schedule"] or \
                    out["heavyball"]["inner_group"] != {k: want["inner_group"][k] for k in
                                                        ("cumulative_prob_prob_step", "cumulative_prob")}:
                fail(f"{case}: 2.x's schedule not carried over: {out['heavyball']}")
        elif soap:
            # 0.x recomputed Q when its step was a multiple of the frequency, one behind 1.x's and 3.x's.
            f = lg.get("precondition_frequency", 2)  # 1.6 pops it out of the groups: its default 2 is taken
            if pickle.loads(out["heavyball"]["precond_schedule"]) != 1 / f or \
                    out["heavyball"]["inner_group"] != {"cumulative_prob_prob_step": 3,
                                                        "cumulative_prob": (3 - version.startswith("0.")) / f}:
                fail(f"{case}: heavyball schedule {out['heavyball']['precond_schedule']!r} "
                     f"{out['heavyball']['inner_group']}")
    print(f"ok: {checked} parameters' state (AdamW 0.12.1, 0.21.8, 0.24.4, 1.4.0, 1.6.3, 2.3.1; SOAP of each) migrated as HeavyBall 3.2.0 "
          "lays it out, values the legacy ones (SOAP's exp_avg rotated), loadable with weights_only=True")
    resume_in_torch(fixtures, scratch)
    unchanged_3x(fixtures, scratch)


def unchanged_3x(fixtures, scratch):
    """migrate of a file already in 3.x's layout writes what torch loads from the input, to the bit."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "oracle"))
    from same_tree import same
    for case in ("adamw", "soap"):
        original = torch.load(os.path.join(fixtures, "3.2.0", case, "optim.pt"), weights_only=True)
        written = torch.load(os.path.join(scratch, "3.2.0", f"{case}.pt"), weights_only=True)
        d = same(original, written)
        if d:
            fail(f"3.2.0 {case}: migrate changed a file already in 3.x's layout: {d}")
    print("ok: HeavyBall 3.2.0 files (AdamW, SOAP) migrated --to heavyball3 unchanged, to the bit")


def resume_in_torch(fixtures, scratch):
    """--to torch: torch.optim.AdamW loads the file and continues the old run closer than fresh state."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from resume_in_torch_adamw import resume_distances
    for version in ("0.12.1", "0.24.4", "1.4.0", "2.3.1", "3.2.0"):
        case_dir = os.path.join(fixtures, version, "adamw" if version in ("0.12.1", "3.2.0") else "adamw_foreach")
        distances = resume_distances(case_dir, os.path.join(scratch, "torch", f"{version}.pt"))
        print(f"torch.optim.AdamW resume from {version}: distance to the old run migrated "
              f"{distances['migrated']:.3g}, fresh {distances['fresh']:.3g}")
        if not distances["migrated"] < distances["fresh"] / 5:
            fail(f"torch {version}: the migrated state does not continue the run ({distances})")
    print("ok: --to torch files resume in torch.optim.AdamW closer to the old run than fresh state")


if __name__ == "__main__":
    main()
