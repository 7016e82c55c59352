"""remap --to fqn of wrapped models' checkpoints, loaded by torch 2.6's own
torch.distributed.checkpoint.state_dict.set_optimizer_state_dict.

Usage (torch 2.6): check_wrapped_fqn.py FIXTURES SCRATCH
  FIXTURES  testdata/frameworks/wrapped_torch26 (gen_wrapped_models.py: DDP, torch.compile and
            activation-checkpointed models saved with index-keyed AdamW state)
  SCRATCH   <name>.fqn.pt, what `optstate remap --to fqn` wrote for each
For each: the state keys and param_groups are the unwrapped FQNs DSD uses ("0.weight", never
"module." or "_orig_mod."); set_optimizer_state_dict loads the file into a fresh optimizer over
the same model wrapped the same way and over the plain model, and every parameter's state then
equals the original file's entry for it, bit for bit.
"""
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.checkpoint.state_dict import set_optimizer_state_dict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "testdata", "gen"))
from gen_wrapped_models import checkpoint_wrapper, net  # noqa: E402


def wrapped(name):
    model = net()
    if name == "ddp":
        return nn.parallel.DistributedDataParallel(model)
    if name == "compiled":
        return torch.compile(model)
    model[1] = checkpoint_wrapper(model[1])
    return model


def main():
    fixtures, scratch = sys.argv[1], sys.argv[2]
    # One process: an in-memory store, so no port is taken (a fixed one could be
    # in use by a parallel run).
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    plain_names = [n for n, _ in net().named_parameters()]
    for name in ("ddp", "compiled", "checkpoint_wrapped"):
        original = torch.load(os.path.join(fixtures, f"{name}.pt"), weights_only=True)["optimizer"]
        osd = torch.load(os.path.join(scratch, f"{name}.fqn.pt"), weights_only=True)["optimizer"]
        if sorted(osd["state"]) != sorted(plain_names) or osd["param_groups"][0]["params"] != plain_names:
            print(f"FAIL {name}: keys {sorted(osd['state'])}, params {osd['param_groups'][0]['params']}")
            return 1
        for target in ("wrapped", "plain"):
            model = wrapped(name) if target == "wrapped" else net()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
            set_optimizer_state_dict(model, opt, osd)
            for i, p in enumerate(model.parameters()):
                for field in ("exp_avg", "exp_avg_sq", "step"):
                    if not torch.equal(opt.state[p][field], original["state"][i][field]):
                        print(f"FAIL {name} into the {target} model: parameter {i} {field} differs")
                        return 1
        print(f"ok: {name}: remap --to fqn loads through set_optimizer_state_dict into the wrapped and the plain "
              "model, every entry on its parameter")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
