"""optstate consolidate of real DeepSpeed 0.16.4 ZeRO-1/2/3 directories, checked by torch 2.6.

Usage (torch 2.6): check_zero.py SCRATCH
  SCRATCH/zeroS.index.pt, zeroS.fqn.pt   `optstate consolidate --to index|fqn` of
                                         testdata/frameworks/deepspeed_0.16.4/zeroS
  SCRATCH/zeroS.dcp                      `optstate export` of zeroS.index.pt (2 ranks)
For each S in CASES (stages 1-3 and the two bf16 runs):
- torch.load(weights_only=True) reads both files;
- every weight DeepSpeed's own zero_to_fp32 gave (zeroS.zero_to_fp32.pt, where it gave any) is in
  'model', equal bit for bit, and every trainable weight equals safe_get_full_fp32_param's, taken in
  the run;
- the model loads strictly into the run's Net, the index optimizer into torch.optim.AdamW over it with
  the run's two groups, and every trainable parameter then holds exactly the exp_avg and exp_avg_sq
  DeepSpeed's safe_get_full_optimizer_state gave (zeroS.optimizer_truth.pt), at step 3;
- the FQN optimizer goes in through torch's set_optimizer_state_dict with the same result;
- the exported DCP checkpoint loads through get_optimizer_state_dict + dcp.load +
  set_optimizer_state_dict with the same result again.
"""
import os
import sys

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict, set_optimizer_state_dict

repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
fixtures = os.path.join(repo, "testdata", "frameworks", "deepspeed_0.16.4")


class Net(torch.nn.Module):  # the generator's model (testdata/gen/gen_deepspeed_zero.py)
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(5, 6)
        self.fc1 = torch.nn.Linear(6, 8)
        self.norm = torch.nn.LayerNorm(8)
        self.fc2 = torch.nn.Linear(8, 3)


# The directories of testdata/frameworks/deepspeed_0.16.4 (check_dcp.sh consolidates the same list):
# stages 1-3, ZeRO-2 with bf16 parameters, and stage 1 bf16 with fp32 gradient accumulation
# (DeepSpeed's BF16_Optimizer, bf16_zero_pp_rank_* files).
CASES = ("1", "2", "3", "2-bf16", "1-bf16-fp32accum")


def fresh():
    model = Net()
    model.emb.weight.requires_grad_(False)
    named = dict(model.named_parameters())
    decay = [named[n] for n in ("fc1.weight", "fc2.weight")]
    no_decay = [named[n] for n in ("fc1.bias", "norm.weight", "norm.bias", "fc2.bias")]
    # Another lr than the file's: the lr check below then means something.
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.5}, {"params": no_decay, "weight_decay": 0.5}], lr=0.5)
    return model, opt


def bits_equal(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(-1).view(torch.int32),
                                                                     b.view(-1).view(torch.int32))


def check_state(stage, how, model, opt, truth):
    for name, p in model.named_parameters():
        if not p.requires_grad:
            if p in opt.state and opt.state[p]:
                raise SystemExit(f"FAIL zero{stage} {how}: frozen {name} got optimizer state")
            continue
        st = opt.state[p]
        for field in ("exp_avg", "exp_avg_sq"):
            if not bits_equal(st[field], truth[name][field].view(p.shape)):
                raise SystemExit(f"FAIL zero{stage} {how}: {name}.{field} is not DeepSpeed's")
        if float(st["step"]) != 3.0:
            raise SystemExit(f"FAIL zero{stage} {how}: {name} step {float(st['step'])}, the run took 3")
    for g, wd in zip(opt.param_groups, (0.01, 0.0)):
        if g["lr"] != 0.01 or g["weight_decay"] != wd:
            raise SystemExit(f"FAIL zero{stage} {how}: group lr {g['lr']} weight_decay {g['weight_decay']}")


def check(stage, scratch):
    # BF16_Optimizer's files (1-bf16-fp32accum) have none: DeepSpeed's zero_to_fp32 refuses them.
    ref_path = os.path.join(fixtures, f"zero{stage}.zero_to_fp32.pt")
    ref = torch.load(ref_path, weights_only=True) if os.path.exists(ref_path) else {}
    truth = torch.load(os.path.join(fixtures, f"zero{stage}.optimizer_truth.pt"), weights_only=True)
    index = torch.load(os.path.join(scratch, f"zero{stage}.index.pt"), weights_only=True)
    fqn = torch.load(os.path.join(scratch, f"zero{stage}.fqn.pt"), weights_only=True)
    for name, want in ref.items():
        if name not in index["model"] or not bits_equal(index["model"][name], want):
            raise SystemExit(f"FAIL zero{stage}: model {name} is not zero_to_fp32's")
    for name, t in truth.items():
        if not bits_equal(index["model"][name], t["fp32"]):
            raise SystemExit(f"FAIL zero{stage}: model {name} is not DeepSpeed's fp32 master weight")
    model, opt = fresh()
    model.load_state_dict(index["model"], strict=True)
    opt.load_state_dict(index["optimizer"])
    check_state(stage, "--to index", model, opt, truth)
    model, opt = fresh()
    model.load_state_dict(fqn["model"], strict=True)
    set_optimizer_state_dict(model, opt, fqn["optimizer"])
    check_state(stage, "--to fqn", model, opt, truth)
    model, opt = fresh()
    model.load_state_dict(index["model"], strict=True)
    state = {"optimizer": get_optimizer_state_dict(model, opt)}
    dcp.load(state, checkpoint_id=os.path.join(scratch, f"zero{stage}.dcp"))
    set_optimizer_state_dict(model, opt, state["optimizer"])
    check_state(stage, "exported to DCP", model, opt, truth)
    print(f"ok: zero{stage}: {len(ref)} weights equal zero_to_fp32's, {len(truth)} parameters' exp_avg/exp_avg_sq "
          f"equal DeepSpeed's, loaded by AdamW (index), set_optimizer_state_dict (fqn) and dcp.load (export)")


def main():
    torch.set_num_threads(1)
    for case in CASES:
        check(case, sys.argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
