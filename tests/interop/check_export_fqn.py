"""export of index-keyed optimizer state, loaded the way FSDP2 and torchtitan resume: torch 2.6's
get_optimizer_state_dict (FQN keys), dcp.load, set_optimizer_state_dict.

Usage (torch 2.6): check_export_fqn.py SCRATCH
  SCRATCH/<case>.dcp   what `optstate export` wrote (check_export.sh says from which fixture)
For each case the fresh optimizer over the same model, filled through DSD from the DCP checkpoint,
holds every parameter's original entry bit for bit (exp_avg, exp_avg_sq, step), its param_groups'
lr is the file's, and where the model was exported too (adamw_rng_state) the model's weights are
the file's.
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


# case: (original optimizer file, key of the optimizer in it, model factory, model exported too)
CASES = {
    "adamw_rng_state": ("plain_torch26/adamw_rng_state.pt", "optimizer", gen_combined_checkpoints.net, True),
    "ddp": ("wrapped_torch26/ddp.pt", "optimizer", gen_wrapped_models.net, False),
    "safetensors_unique": ("safetensors_torch26/unique/optimizer.bin", None, safetensors_unique, False),
}


def check(case, scratch):
    path, key, factory, with_model = CASES[case]
    original = torch.load(os.path.join(frameworks, path), weights_only=True)
    osd_want = original[key] if key else original
    model = factory()
    opt = torch.optim.AdamW(model.parameters(), lr=0.5)
    # An optimizer saved alone (optimizer.bin) is the DCP checkpoint's root, as torch_save_to_dcp makes it.
    osd = get_optimizer_state_dict(model, opt)
    state = {key: osd} if key else osd
    if with_model:
        state["model"] = get_model_state_dict(model)
    dcp.load(state, checkpoint_id=os.path.join(scratch, case + ".dcp"))
    set_optimizer_state_dict(model, opt, osd)
    if with_model:
        set_model_state_dict(model, state["model"])
        for name, t in model.state_dict().items():
            if not torch.equal(t, original["model"][name]):
                raise SystemExit(f"FAIL {case}: model entry {name} differs after dcp.load")
    for i, p in enumerate(model.parameters()):
        for field in ("exp_avg", "exp_avg_sq", "step"):
            if not torch.equal(opt.state[p][field], osd_want["state"][i][field]):
                raise SystemExit(f"FAIL {case}: parameter {i} {field} differs after dcp.load")
    if opt.param_groups[0]["lr"] != osd_want["param_groups"][0]["lr"]:
        raise SystemExit(f"FAIL {case}: lr {opt.param_groups[0]['lr']} is not the file's")
    print(f"ok: {case}: exported DCP loads through get/set_optimizer_state_dict, every entry on its parameter")


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
