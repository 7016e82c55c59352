"""DeepSpeed ZeRO checkpoints from DeepSpeed itself (v0.16.4), CPU, gloo, 2 ranks (mp.spawn).

Usage (torch 2.6 chroot; deepspeed-fixtures.sh extracts DeepSpeed and runs this):
  python3 testdata/gen/gen_deepspeed_zero.py DEEPSPEED_SRC OUTDIR [CASE...]
CASE is a ZeRO stage (1, 2, 3) or a bf16 run: `2-bf16` (bf16 parameters, ZeRO-2's fp32 master
partitions, DeepSpeedZeroOptimizer) or `1-bf16-fp32accum` (bf16 with fp32 gradient accumulation at
stage 1, which DeepSpeed hands to its BF16_Optimizer: `bf16_zero_pp_rank_*` files). Default: all.
For each ZeRO stage: a small MLP (Linear 6->8, LayerNorm 8, Linear 8->3, and an
embedding that is frozen) trained 3 seeded steps by torch.optim.AdamW inside DeepSpeed's ZeRO
optimizer with two param groups (HF's decay split), then `engine.save_checkpoint(OUTDIR/zeroS,
tag="global_step3")`. Beside each: `zeroS_nan/` (the same with a NaN in rank 1's flat exp_avg), `zeroS.zero_to_fp32.pt`, DeepSpeed's own
get_fp32_state_dict_from_zero_checkpoint (the expected weights), `zeroS_missing_rank/` (rank 1's optimizer
file removed), for stage 2 `zero2_mixed_steps/` (rank 1's file from a save one step later) and
`zero2_foreign_rank/` (rank 1's file from a run of a wider model), `zeroS.optimizer_truth.pt` (per trainable parameter, DeepSpeed's safe_get_full_fp32_param and
safe_get_full_optimizer_state of exp_avg and exp_avg_sq, taken in the run), and `zeroS.truth.json`
(stage, world size, the parameters of each group in order, the frozen one, DeepSpeed's version).
A bf16 case writes `zeroS-VARIANT/` with its `.zero_to_fp32.pt`, `.optimizer_truth.pt` and
`.truth.json` (the same model and steps), without the spoiled copies; `1-bf16-fp32accum` has no
`.zero_to_fp32.pt`, since DeepSpeed's zero_to_fp32 refuses BF16_Optimizer files.
"""
import json
import os
import shutil
import socket
import sys

os.environ["DS_ACCELERATOR"] = "cpu"
sys.path.insert(0, sys.argv[1])
OUT = sys.argv[2]
CASES = sys.argv[3:] or ["1", "2", "3", "2-bf16", "1-bf16-fp32accum"]
BF16_VARIANTS = ("bf16", "bf16-fp32accum")
WORLD = 2

import torch  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self, hidden=8):
        super().__init__()
        self.emb = torch.nn.Embedding(5, 6)  # frozen
        self.fc1 = torch.nn.Linear(6, hidden)
        self.norm = torch.nn.LayerNorm(hidden)
        self.fc2 = torch.nn.Linear(hidden, 3)

    def forward(self, idx):
        return self.fc2(torch.relu(self.norm(self.fc1(self.emb(idx)))))


def groups(model):
    decay = [p for n, p in model.named_parameters() if p.requires_grad and not (n.endswith("bias") or "norm" in n)]
    no_decay = [p for n, p in model.named_parameters() if p.requires_grad and (n.endswith("bias") or "norm" in n)]
    return [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]


def worker(rank, stage, port, variant=""):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
                      WORLD_SIZE=str(WORLD))
    torch.set_num_threads(1)
    import deepspeed
    import deepspeed.ops
    # The one shim: DeepSpeed's shared-memory collectives would be JIT-compiled
    # (ninja, a compiler); marked unavailable, it falls back to torch.distributed.
    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    deepspeed.init_distributed(dist_backend="gloo")
    torch.manual_seed(7)
    model = Net(hidden=10 if variant == "wide" else 8)
    model.emb.weight.requires_grad_(False)
    opt = torch.optim.AdamW(groups(model), lr=1e-2)
    config = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1,
              "zero_optimization": {"stage": stage}, "steps_per_print": 1000, "wall_clock_breakdown": False}
    if variant in BF16_VARIANTS:
        config["bf16"] = {"enabled": True}
    if variant == "bf16-fp32accum":
        config["data_types"] = {"grad_accum_dtype": "fp32"}
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=config)
    g = torch.Generator().manual_seed(100 + rank)
    for _ in range(3):
        idx = torch.randint(0, 5, (4,), generator=g)
        y = torch.randn(4, 3, generator=g)
        out = engine(idx)
        loss = torch.nn.functional.mse_loss(out, y.to(out.dtype))
        engine.backward(loss)
        engine.step()
    if variant == "wide":  # only its rank files are used, to plant a rank file of another model
        engine.save_checkpoint(os.path.join(OUT, f".zero{stage}_wide"), tag="global_step3")
        torch.distributed.destroy_process_group()
        return
    # What DeepSpeed itself says each parameter's whole fp32 weight and AdamW
    # moments are (collectives: every rank calls them), the truth a
    # consolidation's per-parameter state is checked against.
    from deepspeed.utils import safe_get_full_fp32_param, safe_get_full_optimizer_state
    truth_state = {}
    # Stages 1, 2 link each parameter to its slice of the optimizer state
    # lazily, once: on the first step, before AdamW had made its state, so the
    # links are empty; cleared, they are made again from the state now there.
    if hasattr(engine.optimizer, "_lazy_init_hp_params_optimizer_state"):
        engine.optimizer._hp_optimizer_states_linked = False
        engine.optimizer._lazy_init_hp_params_optimizer_state()
    for name, p in engine.module.named_parameters():
        if not p.requires_grad:
            continue
        truth_state[name] = {"fp32": safe_get_full_fp32_param(p).detach().clone(),
                             "exp_avg": safe_get_full_optimizer_state(p, "exp_avg").detach().clone(),
                             "exp_avg_sq": safe_get_full_optimizer_state(p, "exp_avg_sq").detach().clone()}
    case = f"zero{stage}" + (f"-{variant}" if variant else "")
    out = os.path.join(OUT, case)
    engine.save_checkpoint(out, tag="global_step3")
    torch.distributed.barrier()
    if rank == 0:
        from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint
        if variant != "bf16-fp32accum":
            weights = get_fp32_state_dict_from_zero_checkpoint(out, tag="global_step3")
            torch.save(dict(weights), os.path.join(OUT, f"{case}.zero_to_fp32.pt"))
        # else: zero_to_fp32 refuses BF16_Optimizer's files ("is not a zero checkpoint": they
        # carry no zero_stage); the weights to expect are optimizer_truth.pt's fp32.
        torch.save(truth_state, os.path.join(OUT, f"{case}.optimizer_truth.pt"))
        fresh = Net()
        fresh.emb.weight.requires_grad_(False)
        names = {id(p): n for n, p in fresh.named_parameters()}
        truth = {"stage": stage, "world_size": WORLD, "deepspeed": "0.16.4", "torch": str(torch.__version__),
                 "groups": [[names[id(p)] for p in grp["params"]] for grp in groups(fresh)],
                 "frozen": ["emb.weight"], "files": sorted(os.listdir(os.path.join(out, "global_step3"))),
                 "beside": sorted(os.listdir(out))}
        if variant in BF16_VARIANTS:
            truth.update(variant=variant, steps=3, model_dtype="bfloat16",
                         optimizer=type(engine.optimizer).__name__,
                         zero_to_fp32=variant != "bf16-fp32accum")
            with open(os.path.join(OUT, f"{case}.truth.json"), "w") as f:
                json.dump(truth, f, indent=1, sort_keys=True)
                f.write("\n")
    if variant in BF16_VARIANTS:
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
        return
    if rank == 0:
        # A copy with a NaN in rank 1's flat exp_avg partition of group 0 (element 5).
        spoiled = os.path.join(OUT, f"zero{stage}_nan")
        shutil.copytree(out, spoiled)
        rank1 = os.path.join(spoiled, "global_step3", "zero_pp_rank_1_mp_rank_00_optim_states.pt")
        sd = torch.load(rank1, map_location="cpu", weights_only=False)
        inner = "optimizer_state_dict" if stage == 3 else "base_optimizer_state"  # stage 3 names it so
        sd["optimizer_state_dict"][inner]["state"][0]["exp_avg"].view(-1)[5] = float("nan")
        torch.save(sd, rank1)
        truth["nan"] = {"dir": f"zero{stage}_nan", "file": "zero_pp_rank_1_mp_rank_00_optim_states.pt",
                        "where": f"optimizer_state_dict.{inner}.state[0].exp_avg[5]"}
        # A copy without rank 1's optimizer file (a copy that stopped short).
        short = os.path.join(OUT, f"zero{stage}_missing_rank")
        shutil.copytree(out, short)
        os.remove(os.path.join(short, "global_step3", "zero_pp_rank_1_mp_rank_00_optim_states.pt"))
        truth["missing_rank"] = {"dir": f"zero{stage}_missing_rank", "file": "zero_pp_rank_1_mp_rank_00_optim_states.pt"}
        truth["steps"] = 3
        with open(os.path.join(OUT, f"zero{stage}.truth.json"), "w") as f:
            json.dump(truth, f, indent=1, sort_keys=True)
            f.write("\n")
    torch.distributed.barrier()
    if stage == 2:
        # One step more, saved aside: rank 1's file of it beside rank 0's of step 3
        # is a directory whose ranks come from two different saves.
        idx = torch.randint(0, 5, (4,), generator=g)
        y = torch.randn(4, 3, generator=g)
        engine.backward(torch.nn.functional.mse_loss(engine(idx), y))
        engine.step()
        later = os.path.join(OUT, ".zero2_step4")
        engine.save_checkpoint(later, tag="global_step4")
        torch.distributed.barrier()
        if rank == 0:
            mixed = os.path.join(OUT, "zero2_mixed_steps")
            shutil.copytree(out, mixed)
            name = "zero_pp_rank_1_mp_rank_00_optim_states.pt"
            shutil.copyfile(os.path.join(later, "global_step4", name), os.path.join(mixed, "global_step3", name))
            shutil.rmtree(later)
    torch.distributed.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    for case in CASES:
        stage, _, variant = case.partition("-")
        stage = int(stage)
        mp.spawn(worker, args=(stage, free_port(), variant), nprocs=WORLD, join=True)
        name = f"zero{stage}" + (f"-{variant}" if variant else "")
        print(f"{name}: {sorted(os.listdir(os.path.join(OUT, name, 'global_step3')))}")
        if stage == 2 and not variant:
            # Rank 1's file from a run of a wider model (hidden 10) in place of this run's.
            mp.spawn(worker, args=(stage, free_port(), "wide"), nprocs=WORLD, join=True)
            foreign = os.path.join(OUT, "zero2_foreign_rank")
            shutil.copytree(os.path.join(OUT, "zero2"), foreign)
            name = "zero_pp_rank_1_mp_rank_00_optim_states.pt"
            shutil.copyfile(os.path.join(OUT, ".zero2_wide", "global_step3", name),
                            os.path.join(foreign, "global_step3", name))
            shutil.rmtree(os.path.join(OUT, ".zero2_wide"))
