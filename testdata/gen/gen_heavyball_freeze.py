"""HeavyBall 1.4.0 runs that DCP's lr=0 init step froze, and a healthy one.

Source: github.com/HomebrewML/HeavyBall tag v1.4.0 (extracted by heavyball-fixtures.sh,
never committed). Usage (torch 2.6 chroot): gen_heavyball_freeze.py HEAVYBALL_SRC OUTDIR
Writes OUTDIR/{frozen,healthy}/step{3,6}.pt: torch.save({"model": model.state_dict(),
"optimizer": opt.state_dict()}) after 3 and 6 steps of ForeachAdamW(foreach=False, lr 1e-2,
then 5e-3 from step 4 on, as a schedule would set it), and
OUTDIR/{frozen,healthy}/truth.json: per parameter whether it moved between the two saves
(max |change|), and each state entry's step at each save.

The frozen run calls torch.distributed.checkpoint.state_dict.get_state_dict(model, opt)
once before training, as a checkpoint helper does. With empty optimizer state DCP first
runs one step at lr=0 to create it (_init_optim_state); HeavyBall 1.4.0's foreach=False
per-parameter group copies (`fake_groups`) are made during that step and keep lr=0 for
good, although param_groups (and every checkpoint) show the right lr. get_state_dict then
raises KeyError on HeavyBall's (Parameter, view) state keys, which DCP cannot map to
FQNs; the helper logs it and training goes on. The healthy run does the same without
that call.
"""
import json
import os
import sys
import warnings

import torch
import torch.nn as nn

warnings.filterwarnings("ignore")


def run(frozen, out):
    import heavyball
    from torch.distributed.checkpoint.state_dict import get_state_dict
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = heavyball.ForeachAdamW(model.parameters(), lr=1e-2, foreach=False)
    note = "no DCP call"
    if frozen:
        try:
            get_state_dict(model, opt)
            note = "get_state_dict succeeded"
        except KeyError as e:
            note = f"get_state_dict raised KeyError after its lr=0 init step ({type(e).__name__})"
    g = torch.Generator().manual_seed(7)
    saved = {}
    for step in range(1, 7):
        if step == 4:  # a schedule's decay between the two saves: the groups' lr changes
            for group in opt.param_groups:
                group["lr"] = 5e-3
        x, y = torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
        opt.zero_grad()
        if step in (3, 6):
            os.makedirs(out, exist_ok=True)
            path = os.path.join(out, f"step{step}.pt")
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, path)
            saved[step] = ({n: p.detach().clone() for n, p in model.named_parameters()},
                           {n: float(opt.state[(p, 0)]["step"]) if (p, 0) in opt.state and "step" in opt.state[(p, 0)]
                            else None for n, p in model.named_parameters()})
    params = []
    for n, _ in model.named_parameters():
        a, b = saved[3][0][n], saved[6][0][n]
        params.append({"name": n, "max_abs_change": float((b - a).abs().max()), "moved": not torch.equal(a, b),
                       "step_at_3": saved[3][1][n], "step_at_6": saved[6][1][n]})
    truth = {"heavyball": "1.4.0 (HomebrewML/HeavyBall v1.4.0)", "torch": torch.__version__.split("+")[0],
             "run": "frozen" if frozen else "healthy", "dcp": note,
             "group_lr": opt.param_groups[0]["lr"],
             "fake_group_lrs": sorted({g["lr"] for g in opt.fake_groups.values()}), "params": params}
    with open(os.path.join(out, "truth.json"), "w") as f:
        json.dump(truth, f, indent=1)
    print(truth["run"], truth["dcp"], "moved:", sum(p["moved"] for p in params), "of", len(params))


def main():
    sys.path.insert(0, sys.argv[1])
    import heavyball.utils
    heavyball.utils.compile_mode = None
    for frozen in (True, False):
        run(frozen, os.path.join(sys.argv[2], "frozen" if frozen else "healthy"))


if __name__ == "__main__":
    main()
