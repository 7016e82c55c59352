"""Real HeavyBall AdamW runs for `optstate migrate`: a legacy run saved and continued, and
HeavyBall 3.x's own checkpoint of the same model (the layout migrate must write).

Source: github.com/HomebrewML/HeavyBall, extracted outside the repository by
heavyball-fixtures.sh (0.12.1 = commit 75390f1; 0.21.8 = commit 8d8b5a6; 0.24.4 = commit 0ad271b; 1.4.0, 1.6.3, 2.3.1,
3.2.0 = tags v1.4.0, v1.6.3, v2.3.1, v3.2.0), put on sys.path.

Usage (inside the torch 2.6 chroot):
  python3 testdata/gen/gen_heavyball_migrate.py HEAVYBALL_SRC VERSION OUTDIR [CASE...]
VERSION 0.21.8, 0.24.4, 1.4.0, 1.6.3 or 2.3.1 writes OUTDIR/adamw_foreach/ and OUTDIR/adamw_perparam/ (ForeachAdamW
with foreach=True / False; 1.4.0 keys state by (Parameter, view), so optim.pt holds a copy of
each parameter, and there is no model in it; 2.3.1 keys by index, nested per view); 0.24.4 and
2.3.1 (and 1.6.3, with merge_dims=False) also OUTDIR/soap/ (ForeachSOAP; 0.24.4's with
foreach=False: with foreach=True 0.24.4's SOAP step reads the last parameter's state for every
parameter and fails on the first two shapes that differ); VERSION 3.2.0 writes OUTDIR/adamw/
(heavyball.AdamW) and OUTDIR/soap/ (heavyball.SOAP). soap_conv is SOAP on ConvNet (both
versions), whose conv weight SOAP keeps as a merged [64, 27] view; 0.24.4's psgd_kron
(ForeachPSGDKron) is what migrate refuses; VERSION 0.12.1 (commit 75390f1, state keyed by bare
data_ptr) writes OUTDIR/adamw/ and OUTDIR/soap/. CASE... limits the run.
Each holds:
  optim.pt            torch.save(opt.state_dict()) after SAVED steps
  model.pt            torch.save(model.state_dict()) at the same point
  manifest.json       the parameters in param_groups order with their data_ptr, what
                      (ptr, shape) keys were made from (schemas/param-manifest.schema.json)
  model.continued.pt  the model after CONTINUED more steps of the same uninterrupted run:
                      what a resumed run should come close to
  truth.json          what the run saw: version, steps, lr, each parameter's sha256 at the
                      save and after the continuation, the group step counter HeavyBall kept
Compilation is off (heavyball.utils.compile_mode = None). Batches come from batches() below,
which the resume check (resume_heavyball3.py) shares.
"""
import hashlib
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# Net: 13 parameters, several of one shape; ConvNet: a conv weight [64, 3, 3, 3] that SOAP merges
# to a [64, 27] view (case soap_conv). resume_heavyball3.py imports them from here.
from gen_heavyball_fsdp2 import ConvNet, Net  # noqa: E402,F401

SAVED = 3
CONTINUED = 3
LR = 1e-2


def model_for(case):
    return ConvNet(10) if case.endswith("_conv") else Net()


def batches(n, case="adamw"):
    g = torch.Generator().manual_seed(7)
    if case.endswith("_conv"):
        return [(torch.randn(4, 3, 8, 8, generator=g), torch.randn(4, 10, generator=g)) for _ in range(n)]
    return [(torch.randint(0, 96, (4, 5), generator=g), torch.randn(4, 5, 64, generator=g)) for _ in range(n)]


def train(model, opt, data):
    for x, y in data:
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
        opt.zero_grad()


def sha(t):
    t = t.detach().contiguous()
    return hashlib.sha256(t.view(torch.uint8).numpy().tobytes()).hexdigest()


def make(version, case):
    import heavyball
    if case == "psgd_kron":  # migrate refuses it by name; the fixture proves the refusal on a real file
        return lambda params: heavyball.ForeachPSGDKron(params, lr=LR)
    extra = {"split": True, "max_precond_dim": 32} if case == "soap_split" else {}
    if version.startswith("0.12."):  # bare data_ptr keys; neither class takes `foreach`
        cls = heavyball.ForeachSOAP if case.startswith("soap") else heavyball.ForeachAdamW
        return lambda params: cls(params, lr=LR, **extra)
    if case.startswith("soap"):
        # soap_split: every dimension above 32 split into blocks of 32, each block a view with
        # state of its own (emb [96, 64] -> 6 views, the [64] biases -> 2).
        if version.startswith("3."):
            return lambda params: heavyball.SOAP(params, lr=LR, **extra)
        if version.startswith("1.6."):  # its default merge_dims=True fails in state_dict() (see main)
            extra["merge_dims"] = False
        return lambda params: heavyball.ForeachSOAP(params, lr=LR, foreach=not version.startswith("0."), **extra)
    if not version.startswith("3."):
        return lambda params: heavyball.ForeachAdamW(params, lr=LR, foreach=case == "adamw_foreach")
    return lambda params: heavyball.AdamW(params, lr=LR)


def run(version, case, out):
    torch.manual_seed(0)
    model = model_for(case)
    opt = make(version, case)(model.parameters())
    data = batches(SAVED + CONTINUED, case)
    train(model, opt, data[:SAVED])
    os.makedirs(out, exist_ok=True)
    torch.save(opt.state_dict(), os.path.join(out, "optim.pt"))
    torch.save(model.state_dict(), os.path.join(out, "model.pt"))
    names = {id(p): n for n, p in model.named_parameters()}
    params = opt.param_groups[0]["params"]
    manifest = {"format": "optstate-param-manifest", "version": 1,
                "params": [{"name": names[id(p)], "shape": list(p.shape), "dtype": "float32",
                            "data_ptr": p.data_ptr(), "group": 0} for p in params]}
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    at_save = {n: sha(p) for n, p in model.named_parameters()}
    train(model, opt, data[SAVED:])
    torch.save(model.state_dict(), os.path.join(out, "model.continued.pt"))
    group = opt.state_dict()["param_groups"][0]
    truth = {"heavyball": version, "case": case, "torch": torch.__version__.split("+")[0], "saved_steps": SAVED,
             "continued_steps": CONTINUED, "lr": LR,
             "group_counter_after_save": {"k": group.get("k")} if "k" in group else {"step": None},
             "params": [{"name": n, "sha256_at_save": at_save[n], "sha256_continued": sha(p)}
                        for n, p in model.named_parameters()]}
    with open(os.path.join(out, "truth.json"), "w") as f:
        json.dump(truth, f, indent=1, sort_keys=True)


def main():
    src, version, out = sys.argv[1], sys.argv[2], sys.argv[3]
    # Some 0.x releases decorate functions with torch.compile directly (0.21: no compile_mode
    # switch for those): compilation is stubbed out, so every version runs eagerly.
    torch.compile = lambda fn=None, **kwargs: fn if fn is not None else (lambda f: f)
    sys.path.insert(0, src)
    import heavyball.utils
    heavyball.utils.compile_mode = None
    cases = {"3.2.0": ("adamw", "soap", "soap_conv", "soap_split"),
             "0.24.4": ("adamw_foreach", "adamw_perparam", "soap", "soap_conv", "soap_split", "psgd_kron"),
             "2.3.1": ("adamw_foreach", "adamw_perparam", "soap", "soap_split"),
             "1.4.0": ("adamw_foreach", "adamw_perparam", "soap"),
             # 1.6.3's SOAP with its default merge_dims=True cannot save a state_dict (its keys are
             # view tensors torch cannot map: KeyError); with merge_dims=False it saves index keys.
             "1.6.3": ("adamw_foreach", "adamw_perparam", "soap"),
             "0.12.1": ("adamw", "soap", "soap_split"),
             "0.21.8": ("adamw_foreach", "adamw_perparam", "soap")}.get(
        version, ("adamw_foreach", "adamw_perparam"))
    for case in sys.argv[4:] or cases:
        run(version, case, os.path.join(out, case))
        print(version, case, sorted(os.listdir(os.path.join(out, case))))


if __name__ == "__main__":
    main()
