"""Real torch checks what `optstate regenerate` writes (check_regenerate_command.sh makes the files).

Usage: python3 tests/interop/check_regenerate_command.py SCRATCH
Prints one line per check and exits 1 if any fails.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_fixtures as cf  # noqa: E402

torch = cf.torch


def load(path):
    kwargs = {"map_location": "cpu"}
    if cf.TORCH2:
        kwargs["weights_only"] = True
    return torch.load(path, **kwargs)


def check_model_amsgrad(s):
    sd = load(os.path.join(s, "model_amsgrad.pt"))
    params = [torch.nn.Parameter(t.clone()) for t in sd["model"].values()]
    opt = torch.optim.AdamW(params, amsgrad=True)
    opt.load_state_dict(sd["optimizer"])
    for p in params:
        st = opt.state[p]
        if float(st["step"]) != 5.0:
            return f"step {float(st['step'])} != 5"
        if not all(torch.isfinite(st[k]).all() for k in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")):
            return "non-finite state"
        if (st["exp_avg_sq"] < 0).any() or (st["max_exp_avg_sq"] < st["exp_avg_sq"]).any():
            return "exp_avg_sq negative or above its max"
        p.grad = torch.zeros_like(p)
    opt.step()  # AdamW runs on it
    return None


FAMILY = {"sgd": "SGD", "sgd_plain": "SGD", "adam": "Adam", "adagrad": "Adagrad", "rmsprop": "RMSprop"}


def check_family(s, name):
    """torch's own class takes the file: same group keys and state fields as it writes, and a step runs."""
    sd = load(os.path.join(s, f"family_{name}.pt"))
    group = sd["optimizer"]["param_groups"][0]
    cls = getattr(torch.optim, FAMILY[name])
    params = [torch.nn.Parameter(t.clone()) for t in sd["model"].values()]
    hyper = {k: v for k, v in group.items() if k != "params"}
    if not cf.TORCH2:  # 1.13's classes lack some of 2.6's arguments
        hyper = {k: v for k, v in hyper.items() if k not in ("fused", "capturable", "differentiable")}
    opt = cls(params, **hyper)
    for p in params:
        p.grad = torch.full_like(p, 0.01)
    opt.step()  # the fields torch itself keeps for these hyperparameters
    want_fields = {k for k in opt.state[params[0]]} if opt.state else set()
    if cf.TORCH2 and list(opt.state_dict()["param_groups"][0]) != list(group):
        return f"group keys {list(group)} != torch's {list(opt.state_dict()['param_groups'][0])}"
    loaded = cls(params, **hyper)
    loaded.load_state_dict(sd["optimizer"])
    got_fields = set(sd["optimizer"]["state"][0]) if sd["optimizer"]["state"] else set()
    if cf.TORCH2 and got_fields != want_fields:
        return f"state fields {sorted(got_fields)} != torch's {sorted(want_fields)}"
    for st in loaded.state.values():
        for k, v in st.items():
            if torch.is_tensor(v) and not torch.isfinite(v).all():
                return f"non-finite {k}"
    loaded.step()
    return None


def check_fqn(s):
    sd = load(os.path.join(s, "fqn.pt"))
    names = sd["param_groups"][0]["params"]
    if list(sd["state"]) != names or not names[0] == "embed.weight":
        return "state keys are not the parameter names in order"
    return None


def check_model_start(s):
    got = load(os.path.join(s, "model_lr0.pt"))["model"]
    want = load(os.path.join(cf.REPO, "testdata", "good", "torch113", "heavyball_tied_model.pt"))
    if list(got) != ["emb.weight", "proj.weight", "fc.weight", "out.bias"]:
        return f"parameters {list(got)}: tied duplicate or buffers not dropped"
    for name, t in got.items():
        diff = cf.first_difference(t, want[name], name)
        if diff:
            return diff
    return None


def state_of(entry):
    """A per-view nested entry ({0: {...}, 1: {...}}) as one entry, views concatenated on dim 0."""
    if all(isinstance(k, int) for k in entry):
        views = [entry[k] for k in sorted(entry)]
        return {f: torch.cat([v[f] for v in views]) if views[0][f].dim() else views[0][f] for f in views[0]}
    return entry


def same_state(got_path, want):
    got = load(got_path)
    if list(got["state"]) != list(want["state"]):
        return "state keys differ"
    for k, w in want["state"].items():
        diff = cf.first_difference(state_of(got["state"][k]), w, f"state[{k}]")
        if diff:
            return diff
    return None


def main():
    s = sys.argv[1]
    plain = load(os.path.join(s, "plain.pt"))
    checks = {
        "with model, amsgrad: AdamW.load_state_dict and a step": lambda: check_model_amsgrad(s),
        "fqn keys": lambda: check_fqn(s),
        **{f"--optimizer {n}: torch.optim.{FAMILY[n]} takes it": (lambda n=n: check_family(s, n)) for n in FAMILY},
        "--model: its weights are the starting values": lambda: check_model_start(s),
        "ptr-shape with split views, remapped: the canonical state of the same seed":
            lambda: same_state(os.path.join(s, "ptr.remapped.pt"), plain),
        "string-index, remapped: the canonical state of the same seed":
            lambda: same_state(os.path.join(s, "str.remapped.pt"), plain),
    }
    print(f"torch {torch.__version__}: checking regenerated checkpoints in {s}")
    failed = 0
    for name, fn in checks.items():
        diff = fn()
        print(("ok   " if diff is None else "FAIL ") + name + ("" if diff is None else f": {diff}"))
        failed += diff is not None
    print(f"{len(checks) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
