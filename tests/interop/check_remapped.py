"""Real torch checks optstate remap outputs against the fixture truth.

Usage: python3 tests/interop/check_remapped.py SCRATCH
SCRATCH/<line>/<name>.<variant>.pt is `optstate remap` of testdata/good/<line>/<name>.pt
(check_remap.sh makes them; variant drop/share/reset: that --on-collision
policy; manifest, model, ownmodel: where the parameters came from). For every
parameter, the remapped entry (or each view of it) must equal, tensor for
tensor, the original entry that the generator recorded as really belonging to
it. Parameters whose state was merged get none (drop), their own copy of the
merged entry that aliases no other parameter's (share), or the same structure
all zero (reset); state of temporary copies (orphans) goes nowhere; torch.optim's
load_state_dict must file every entry under the right parameter (AdamW itself
where the state has AdamW's fields); and torch 2.x must load the file with
weights_only=True. Ends with 'N passed, N failed, N skipped'.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_fixtures as cf  # noqa: E402

torch = cf.torch


def load(path, weights_only):
    kwargs = {"map_location": "cpu"}
    if cf.TORCH2:
        kwargs["weights_only"] = weights_only
    return torch.load(path, **kwargs)


def optimizer_dict(obj):
    return obj["optimizer"] if "optimizer" in obj else obj


def same_entry(a, b):
    if set(a) != set(b):
        return f"fields {sorted(a)} != {sorted(b)}"
    for k in a:
        diff = cf.first_difference(a[k], b[k], f"field {k}")
        if diff:
            return diff
    return None


def check_dtensor_fqn(line, name, out):
    """An FSDP2 rank's own optimizer file, remapped to FQN keys with the model of
    torch's dcp_to_torch_save: each DTensor entry comes through whole (local
    shard bytes, global shape, placements) under its parameter's name."""
    if not cf.TORCH2:
        raise cf.Skip("needs torch 2.x")
    import torch.distributed.tensor  # noqa: F401  (allowlists the DTensor classes)
    src = os.path.join(cf.REPO, "testdata", "good", line, name.split(".")[0] + ".pt")
    names = list(load(os.path.join(cf.REPO, "testdata", "good", line, "fsdp2_dcp.consolidated.pt"),
                      weights_only=False)["model"])
    original = load(src, weights_only=False)
    remapped = load(out, weights_only=True)
    if list(remapped["state"]) != names or remapped["param_groups"][0]["params"] != names:
        return f"keys {list(remapped['state'])[:3]}... are not the model's names in order"
    for i, fqn in enumerate(names):
        a, b = original["state"][i], remapped["state"][fqn]
        for k in a:
            x, y = a[k], b[k]
            if type(x) is not type(y):
                return f"{fqn}.{k}: {type(x).__name__} != {type(y).__name__}"
            if hasattr(x, "to_local"):
                if (x.shape != y.shape or x.placements != y.placements
                        or not torch.equal(x.to_local(), y.to_local())):
                    return f"{fqn}.{k}: DTensor differs"
            elif not torch.equal(x, y):
                return f"{fqn}.{k} differs"
    return None


def check(line, name, out):
    if name.startswith("fsdp2_rank"):
        return check_dtensor_fqn(line, name, out)
    base, variant = name.split(".")[0], name.split(".")[1]
    policy = variant if variant in ("drop", "share", "reset") else "fail"
    src = os.path.join(cf.REPO, "testdata", "good", line, base)
    manifest = json.load(open(src + ".manifest.json"))["params"]
    truth = json.load(open(src + ".truth.json"))["keys"]
    original = optimizer_dict(load(src + ".pt", weights_only=False))
    remapped = optimizer_dict(load(out, weights_only=True))
    orig_entries = list(original["state"].values())
    # Which original entry holds (param, view), per the truth.
    owner = {}
    for i, t in enumerate(truth):
        users = t["used_by"]
        for u in users:
            owner[(u["param"], u["view"])] = (i, len(users) > 1)
    for p, info in enumerate(manifest):
        views = sorted(v for (n, v) in owner if n == info["name"])
        merged = any(owner[(info["name"], v)][1] for v in views)
        if merged and policy == "drop":
            if p in remapped["state"]:
                return f"{info['name']}: merged state was not dropped"
            continue
        if merged and policy == "reset":
            got, want = remapped["state"][p], orig_entries[owner[(info["name"], 0)][0]]
            if set(got) != set(want):
                return f"{info['name']}: reset changed the fields"
            for k, t in got.items():
                if t.shape != want[k].shape or t.dtype != want[k].dtype or bool(t.count_nonzero()):
                    return f"{info['name']}: reset field {k} is not zeros of the same shape"
            continue
        if not views:  # its state went to a temporary copy (orphan): it must get none
            if p in remapped["state"]:
                return f"{info['name']}: state attached though it never had any"
            continue
        if p not in remapped["state"]:
            return f"{info['name']}: no state in the output"
        got = remapped["state"][p]
        for v in views:
            entry = got[v] if len(views) > 1 else got
            diff = same_entry(entry, orig_entries[owner[(info["name"], v)][0]])
            if diff:
                return f"{info['name']} view {v}: {diff}"
    if [g["params"] for g in remapped["param_groups"]] != [list(range(len(manifest)))]:
        return f"param_groups params are {remapped['param_groups'][0]['params'][:5]}..."
    params = [torch.nn.Parameter(torch.zeros(m["shape"], dtype=getattr(torch, m["dtype"]))) for m in manifest]
    adamw = all(set(e) == {"step", "exp_avg", "exp_avg_sq"} and isinstance(e["step"], torch.Tensor)
                for e in orig_entries)
    # AdamW where the state has its fields; otherwise SGD, because AdamW's
    # __setstate__ requires a 'step' field, which HeavyBall-style state (counter
    # in the group) never had. Either way load_state_dict must file each entry
    # under the right parameter.
    opt = (torch.optim.AdamW if adamw else torch.optim.SGD)(params, lr=0.1)
    opt.load_state_dict(remapped)
    for p, param in enumerate(params):
        if (p in remapped["state"]) != (param in opt.state):
            return f"load_state_dict placed the state of parameter {p} elsewhere"
        if adamw and p in remapped["state"]:
            diff = same_entry(opt.state[param], remapped["state"][p])
            if diff:
                return f"AdamW.load_state_dict changed parameter {p}'s state: {diff}"
    if policy == "share":
        seen = {}
        for param in params:
            for k, t in opt.state.get(param, {}).items():
                if isinstance(t, torch.Tensor) and t.numel():
                    if t.data_ptr() in seen:
                        return f"shared copies alias each other ({k})"
                    seen[t.data_ptr()] = k
    return None


def main():
    return cf.run_scratch("remapped", sys.argv[1], check)


if __name__ == "__main__":
    sys.exit(main())
