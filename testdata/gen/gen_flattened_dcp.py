"""DCP checkpoints in torchtitan's layout: the optimizer flattened by torch's own DSD
(StateDictOptions(flatten_optimizer_state_dict=True), which torchtitan's OptimizersContainer uses),
so its DCP keys are optimizer.state.<fqn>.<field> and optimizer.param_groups.<fqn>.<hyper>
(issue 19, item 3). torchtitan's own code is not run: the dict saved is composed as its
CheckpointManager._flattened_model_states_sd composes it (pytorch/torchtitan, main in 2026): the
model's entries at the top level, beside optimizer, lr_scheduler and train_state.

Usage (torch 2.6, one process, gloo): gen_flattened_dcp.py OUTDIR
Writes, for a small net trained 3 seeded AdamW steps under a LambdaLR warmup:
  OUTDIR/flattened_dcp/            dcp.save of that dict
  OUTDIR/flattened_dcp_nan/        the same with a NaN in one exp_avg (what validate must catch)
  OUTDIR/flattened_dcp.expected.pt torch.save({"optimizer": get_optimizer_state_dict(model, opt)}):
                                   the same state in DSD's nested FQN layout, the truth
                                   consolidate must rebuild
"""
import io
import os
import shutil
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict


def net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Embedding(12, 6), nn.Linear(6, 6), nn.LayerNorm(6), nn.Linear(6, 4))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29541")
    dist.init_process_group("gloo", rank=0, world_size=1)
    model = net()
    opt = torch.optim.AdamW(model.parameters(), lr=8e-4, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 2))
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        model(torch.randint(0, 12, (4, 5), generator=g)).square().mean().backward()
        opt.step()
        opt.zero_grad()
        sched.step()
    flat = get_optimizer_state_dict(model, opt, options=StateDictOptions(flatten_optimizer_state_dict=True))
    nested = get_optimizer_state_dict(model, opt)
    losses = io.BytesIO()
    torch.save([0.51, 0.47, 0.44], losses)
    state = dict(model.state_dict())
    state.update({"optimizer": flat, "lr_scheduler": sched.state_dict(),
                  "train_state": {"step": torch.tensor(3, dtype=torch.int32), "global_avg_losses": losses}})
    for name, planted in (("flattened_dcp", False), ("flattened_dcp_nan", True)):
        path = os.path.join(out, name)
        shutil.rmtree(path, ignore_errors=True)
        if planted:
            state["optimizer"]["state.1.weight.exp_avg"] = state["optimizer"]["state.1.weight.exp_avg"].clone()
            state["optimizer"]["state.1.weight.exp_avg"].view(-1)[3] = float("nan")
        dcp.save(state, checkpoint_id=path)
    torch.save({"optimizer": nested}, os.path.join(out, "flattened_dcp.expected.pt"))
    print(sorted(flat)[:4], "...", len(flat), "flattened keys")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
