"""The outputs oracle, run by real torch: what optstate wrote loads, and resumes bit for bit.

Usage: python3 resume_oracle.py CORPUS_DIR OUTPUTS_DIR RESULT_JSON
  (torch 1.13 on the corpus torch 1.13 wrote, torch 2.6 on both; paths relative to the repository)

For every case of CORPUS_DIR/corpus.json with an output OUTPUTS_DIR/<case>.<command>.pt:
  loads    torch.load of the output with weights_only=True (torch 2.x: its default) succeeds, and
           what it loads equals what the original loads (tensors to the bit, objects by __dict__)
  resumes  the generator's model and optimizer (same class, arguments and groups) loaded from the
           original and, separately, from the output, then stepped once on the same batch, end
           with bit-identical parameters and optimizer state (NaN compared by its bits)
Cases whose model the generator builds otherwise (model_*) and schedulers saved alone are checked
for loading only. A file whose original torch 2.6 refuses with weights_only=True (torch 1.13's
OneCycleLR pickles the scheduler object) is loaded with weights_only=False both times.
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "testdata", "gen"))
import enumerate_training as G  # noqa: E402  (the corpus generator's model, build and step)
from same_tree import bits, same  # noqa: E402

WEIGHTS_ONLY = not torch.__version__.startswith("1.")  # 1.13's weights_only reader lacks BINFLOAT


def load(path, weights_only):
    kwargs = {"map_location": "cpu"}
    if "weights_only" in torch.load.__code__.co_varnames:
        kwargs["weights_only"] = weights_only
    return torch.load(path, **kwargs)


def resumed(case, state):
    """The run rebuilt from `state` and stepped once: every tensor it ends with, in order."""
    cls = getattr(torch.optim, case["class"].rsplit(".", 1)[-1])
    net, opt, dense = G.build(cls, case["kwargs"], case["variant"] == "groups3", case["sparse_gradients"])
    net.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    if dense is not None:
        dense.load_state_dict(state["optimizer_dense"])
    G.step(net, opt, dense, G.batches(2)[0])
    out = [("param " + n, p.detach()) for n, p in net.named_parameters()]
    for o, tag in ((opt, "optimizer"), (dense, "optimizer_dense")):
        if o is None:
            continue
        for k, st in sorted(o.state_dict()["state"].items()):
            for field, v in st.items():
                if isinstance(v, torch.Tensor):
                    out.append((f"{tag}.state[{k}].{field}", v.detach()))
    return out


def first_difference(a, b):
    if [n for n, _ in a] != [n for n, _ in b]:
        return "different state fields after the step"
    for (name, x), (_, y) in zip(a, b):
        if x.shape != y.shape or x.dtype != y.dtype or not torch.equal(bits(x), bits(y)):
            return f"{name} differs after one step"
    return ""


def main():
    corpus_dir, outputs_dir, result_path = sys.argv[1:4]
    with open(os.path.join(corpus_dir, "corpus.json")) as f:
        corpus = json.load(f)
    results = {}
    for case in corpus["cases"]:
        for name in sorted(os.listdir(outputs_dir)):
            if not name.startswith(case["case"] + ".") or not name.endswith(".pt"):
                continue
            command = name[len(case["case"]) + 1:-3]
            out_path = os.path.join(outputs_dir, name)
            r = {"torch": torch.__version__.split("+")[0]}
            # As strict as the original allows: what torch 2.6 refuses to load safely in the
            # input (pickled objects) it may refuse in the output too.
            try:
                load(os.path.join(corpus_dir, case["file"]), WEIGHTS_ONLY)
                strict = WEIGHTS_ONLY
            except Exception:  # noqa: BLE001
                strict = False
            try:
                written = load(out_path, strict)
                r["loads"] = ""
            except Exception as e:  # noqa: BLE001 - the refusal is the finding
                r["loads"] = f"torch.load(weights_only={strict}) refuses it: {str(e).strip().splitlines()[-1][:200]}"
                results[f"{case['case']}.{command}"] = r
                continue
            original = load(os.path.join(corpus_dir, case["file"]), False)
            r["resumes"] = same(original, written)  # what loads is what was saved, tensors to the bit
            resumable = case["kind"] in ("optimizer", "scheduler") or case.get("save_option", "").startswith(
                ("pickle_protocol", "_use_new", "torch.save to", "torch.serial", "_disable"))
            if resumable and not r["resumes"]:
                try:
                    r["resumes"] = first_difference(resumed(case, original), resumed(case, written))
                except Exception as e:  # noqa: BLE001
                    r["resumes"] = f"resuming raised {type(e).__name__}: {str(e).strip().splitlines()[0][:200]}"
            results[f"{case['case']}.{command}"] = r
    with open(result_path, "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)
    print(f"{result_path}: {len(results)} outputs judged by torch {torch.__version__}")


if __name__ == "__main__":
    main()
