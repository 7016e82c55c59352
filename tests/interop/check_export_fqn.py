"""export of index-keyed optimizer state, loaded the way FSDP2 and torchtitan resume: torch 2.6's
get_optimizer_state_dict (FQN keys), dcp.load, set_optimizer_state_dict.

Usage (torch 2.6): check_export_fqn.py SCRATCH
  SCRATCH/<case>.dcp   what `optstate export` wrote (check_export.sh says from which fixture)
For each case the fresh optimizer over the same model, filled through DSD from the DCP checkpoint,
holds every parameter's original entry bit for bit (exp_avg, exp_avg_sq, step), its param_groups'
lr is the file's, and where the model was exported too (adamw_rng_state, ddp) the model's weights
are the file's (DDP's saved under module.<name>, loaded through DSD's unwrapped names).
"""
import os
import sys

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (get_model_state_dict, get_optimizer_state_dict,
                                                     set_model_state_dict, set_optimizer_state_dict)

repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(repo, "testdata", "gen"))
import gen_combined_checkpoints  # noqa: E402
import gen_safetensors_models  # noqa: E402
import gen_wrapped_models  # noqa: E402

frameworks = os.path.join(repo, "testdata", "frameworks")


def safetensors_unique():
    return dict(gen_safetensors_models.nets())["unique"]


# case: (original optimizer file, {key of each optimizer in it: its class}, model factory, model exported too)
CASES = {
    "adamw_rng_state": ("plain_torch26/adamw_rng_state.pt", {"optimizer": torch.optim.AdamW},
                        gen_combined_checkpoints.net, True),
    # The model too: DSD names its entries without DDP's module., as the optimizer's FQNs are.
    "ddp": ("wrapped_torch26/ddp.pt", {"optimizer": torch.optim.AdamW}, gen_wrapped_models.net, True),
    "safetensors_unique": ("safetensors_torch26/unique/optimizer.bin", {None: torch.optim.AdamW},
                           safetensors_unique, False),
    # Two index-keyed optimizers over one model: both are rekeyed, both load through DSD.
    "two_optimizers": ("plain_torch26/two_optimizers.pt",
                       {"optimizer": torch.optim.AdamW, "optimizer_sgd": torch.optim.SGD},
                       gen_combined_checkpoints.net, True),
}


def check(case, scratch):
    path, optimizers, factory, with_model = CASES[case]
    original = torch.load(os.path.join(frameworks, path), weights_only=True)
    model = factory()
    # Built with the file's hyperparameters but another lr (the lr check below then means something):
    # SGD's momentum decides whether it keeps a momentum_buffer at all.
    opts = {}
    for key, cls in optimizers.items():
        hyper = {k: v for k, v in (original[key] if key else original)["param_groups"][0].items() if k != "params"}
        opts[key] = cls(model.parameters(), **dict(hyper, lr=0.5))
    # An optimizer saved alone (optimizer.bin) is the DCP checkpoint's root, as torch_save_to_dcp makes it.
    osds = {key: get_optimizer_state_dict(model, opt) for key, opt in opts.items()}
    state = dict(osds) if None not in osds else osds[None]
    if with_model:
        state["model"] = get_model_state_dict(model)
    dcp.load(state, checkpoint_id=os.path.join(scratch, case + ".dcp"))
    for key, opt in opts.items():
        set_optimizer_state_dict(model, opt, osds[key])
    if with_model:
        set_model_state_dict(model, state["model"])
        for name, t in model.state_dict().items():
            saved = original["model"].get(name, original["model"].get("module." + name))
            if saved is None or not torch.equal(t, saved):
                raise SystemExit(f"FAIL {case}: model entry {name} differs after dcp.load")
    entries = 0
    for key, opt in opts.items():
        want = original[key] if key else original
        for i, p in enumerate(model.parameters()):
            if set(opt.state[p]) != set(want["state"][i]):
                raise SystemExit(f"FAIL {case}: {key} parameter {i} has fields {sorted(opt.state[p])}, "
                                 f"the file {sorted(want['state'][i])}")
            for field, value in want["state"][i].items():
                if not torch.equal(opt.state[p][field], value):
                    raise SystemExit(f"FAIL {case}: {key} parameter {i} {field} differs after dcp.load")
                entries += 1
        if opt.param_groups[0]["lr"] != want["param_groups"][0]["lr"]:
            raise SystemExit(f"FAIL {case}: {key} lr {opt.param_groups[0]['lr']} is not the file's")
    print(f"ok: {case}: exported DCP loads through get/set_optimizer_state_dict "
          f"({len(opts)} optimizer(s), {entries} fields, every entry on its parameter)")


def main():
    scratch = sys.argv[1]
    # One process, no process group: DSD and dcp.load work without one, and a gloo group
    # here hung about one run in three (a futex wait after init, never reproduced without it).
    torch.set_num_threads(1)
    for case in CASES:
        check(case, scratch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
