"""Shared by check_heavyball_unshard.py and check_heavyball_tp.py: load an exported DCP model
and optimizer into a sharded model the way a training script resumes, and compare every
parameter and AdamW moment, gathered with full_tensor(), with the unsharded files."""
import os

import torch


def load_and_compare(model, opt, scratch, prefix, label):
    """SCRATCH/<prefix>dcp_model and <prefix>dcp_optim into `model` / `opt` (AdamW), checked
    against SCRATCH/<prefix>fixed.{model,optim}.pt; SystemExit naming `label` on a difference."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import DefaultLoadPlanner
    from torch.distributed.checkpoint.state_dict import (get_model_state_dict, get_optimizer_state_dict,
                                                         set_model_state_dict, set_optimizer_state_dict)
    msd = get_model_state_dict(model)
    dcp.load(msd, checkpoint_id=os.path.join(scratch, prefix + "dcp_model"))
    set_model_state_dict(model, msd)
    osd = get_optimizer_state_dict(model, opt)
    # HeavyBall 0.24.4's AdamW keeps no per-parameter step: torch's stays as initialised.
    dcp.load(osd, checkpoint_id=os.path.join(scratch, prefix + "dcp_optim"),
             planner=DefaultLoadPlanner(allow_partial_load=True))
    set_optimizer_state_dict(model, opt, osd)
    want_model = torch.load(os.path.join(scratch, prefix + "fixed.model.pt"), weights_only=True)
    want_optim = torch.load(os.path.join(scratch, prefix + "fixed.optim.pt"), weights_only=True)
    for name, p in model.named_parameters():
        if not torch.equal(p.full_tensor(), want_model[name]):
            raise SystemExit(f"{label}: parameter {name} differs after loading")
        for field in ("exp_avg", "exp_avg_sq"):
            if not torch.equal(opt.state[p][field].full_tensor(), want_optim["state"][name][field]):
                raise SystemExit(f"{label}: {name}.{field} differs after loading")
