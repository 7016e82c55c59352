"""DeepSpeed ZeRO checkpoints from DeepSpeed itself (v0.16.4), CPU, gloo, 2 ranks (mp.spawn).

Usage (torch 2.6 chroot; deepspeed-fixtures.sh extracts DeepSpeed and runs this):
  python3 testdata/gen/gen_deepspeed_zero.py DEEPSPEED_SRC OUTDIR [STAGE...]
For each ZeRO stage (default 1 2 3): a small MLP (Linear 6->8, LayerNorm 8, Linear 8->3, and an
embedding that is frozen) trained 3 seeded steps by torch.optim.AdamW inside DeepSpeed's ZeRO
optimizer with two param groups (HF's decay split), then `engine.save_checkpoint(OUTDIR/zeroS,
tag="global_step3")`. Beside each: `zeroS_nan/` (the same with a NaN in rank 1's flat exp_avg), `zeroS.zero_to_fp32.pt`, DeepSpeed's own
get_fp32_state_dict_from_zero_checkpoint (the expected weights), and `zeroS.truth.json`
(stage, world size, the parameters of each group in order, the frozen one, DeepSpeed's version).
"""
import json
import os
import shutil
import socket
import sys

os.environ["DS_ACCELERATOR"] = "cpu"
sys.path.insert(0, sys.argv[1])
OUT = sys.argv[2]
STAGES = [int(s) for s in sys.argv[3:]] or [1, 2, 3]
WORLD = 2

import torch  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(5, 6)  # frozen
        self.fc1 = torch.nn.Linear(6, 8)
        self.norm = torch.nn.LayerNorm(8)
        self.fc2 = torch.nn.Linear(8, 3)

    def forward(self, idx):
        return self.fc2(torch.relu(self.norm(self.fc1(self.emb(idx)))))


def groups(model):
    decay = [p for n, p in model.named_parameters() if p.requires_grad and not (n.endswith("bias") or "norm" in n)]
    no_decay = [p for n, p in model.named_parameters() if p.requires_grad and (n.endswith("bias") or "norm" in n)]
    return [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]


def worker(rank, stage, port):
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
    model = Net()
    model.emb.weight.requires_grad_(False)
    opt = torch.optim.AdamW(groups(model), lr=1e-2)
    config = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1,
              "zero_optimization": {"stage": stage}, "steps_per_print": 1000, "wall_clock_breakdown": False}
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=config)
    g = torch.Generator().manual_seed(100 + rank)
    for _ in range(3):
        idx = torch.randint(0, 5, (4,), generator=g)
        y = torch.randn(4, 3, generator=g)
        loss = torch.nn.functional.mse_loss(engine(idx), y)
        engine.backward(loss)
        engine.step()
    out = os.path.join(OUT, f"zero{stage}")
    engine.save_checkpoint(out, tag="global_step3")
    torch.distributed.barrier()
    if rank == 0:
        from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint
        weights = get_fp32_state_dict_from_zero_checkpoint(out, tag="global_step3")
        torch.save(dict(weights), os.path.join(OUT, f"zero{stage}.zero_to_fp32.pt"))
        fresh = Net()
        fresh.emb.weight.requires_grad_(False)
        names = {id(p): n for n, p in fresh.named_parameters()}
        truth = {"stage": stage, "world_size": WORLD, "deepspeed": "0.16.4", "torch": str(torch.__version__),
                 "groups": [[names[id(p)] for p in grp["params"]] for grp in groups(fresh)],
                 "frozen": ["emb.weight"], "files": sorted(os.listdir(os.path.join(out, "global_step3"))),
                 "beside": sorted(os.listdir(out))}
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
        with open(os.path.join(OUT, f"zero{stage}.truth.json"), "w") as f:
            json.dump(truth, f, indent=1, sort_keys=True)
            f.write("\n")
    torch.distributed.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    for stage in STAGES:
        mp.spawn(worker, args=(stage, free_port()), nprocs=WORLD, join=True)
        print(f"zero{stage}: {sorted(os.listdir(os.path.join(OUT, f'zero{stage}', 'global_step3')))}")
