"""DCP checkpoints written by torchtitan's own CheckpointManager (pytorch/torchtitan v0.1.0, the
last tag that runs on torch 2.6; its dataloader is pytorch/data v0.11.0's StatefulDataLoader).

Usage (torch 2.6 chroot, see torchtitan-fixtures.sh): gen_torchtitan_run.py SRC OUTDIR
  SRC  colon-separated directories holding the extracted `torchtitan` and `torchdata` packages
A 2-layer llama3 `Transformer` of torchtitan's (dim 16, vocab 64) is sharded with FSDP2 on 2 CPU
ranks (gloo), stepped 6 times by torchtitan's build_optimizers (AdamW, its defaults: lr 8e-4,
weight decay 0.1, implementation "fused") under its build_lr_schedulers (2 warmup steps, linear
decay to lr_min 0), and saved by CheckpointManager with interval 3, so:
  OUTDIR/run/checkpoint/step-3/       mid-run checkpoint
  OUTDIR/run/checkpoint/step-6/       the last step (CheckpointManager.save(force=True))
  OUTDIR/nan/checkpoint/step-6/       the same state with a NaN planted in one exp_avg shard
  OUTDIR/model_only/checkpoint/step-6/ last_save_model_weights_only with export_dtype bfloat16
  OUTDIR/truth.pt    torch.save of DSD's full (gathered) nested optimizer and model state at step 6
  OUTDIR/truth.json  what the run recorded: lr per step, where the NaN is, the keys it saved
The optimizer is saved as OptimizersContainer saves it: DSD with flatten_optimizer_state_dict=True,
so its DCP keys are optimizer.state.<fqn>.<field> and optimizer.param_groups.<fqn>.<hyper>.

Stubs, import-only: torchtitan's package __init__s (they import every model, experiment and
quantization recipe) are replaced by bare packages; `tyro` (its CLI parser, unused here) and
torchtitan.components.metrics (imports tensorboard, unused here) by empty modules.
"""
import hashlib
import json
import os
import sys
import types
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_dcp_fsdp2 import free_port, patch_cpu_gloo  # noqa: E402

warnings.filterwarnings("ignore", message="TypedStorage is deprecated")

STEPS = 6
INTERVAL = 3
NAN_AT = ("layers.0.attention.wq.weight", 5)  # fqn, flat index in rank 0's shard of exp_avg


def install_stubs():
    base = None
    for entry in sys.path:
        if os.path.isfile(os.path.join(entry, "torchtitan", "config_manager.py")):
            base = os.path.join(entry, "torchtitan")
    if base is None:
        raise SystemExit("torchtitan is not on PYTHONPATH")
    for pkg in ("torchtitan", "torchtitan.models", "torchtitan.models.llama3"):
        module = types.ModuleType(pkg)
        module.__path__ = [os.path.join(base, *pkg.split(".")[1:])]
        sys.modules[pkg] = module
    tyro = types.ModuleType("tyro")  # config_manager makes a registry at import and names its types
    tyro.constructors = types.SimpleNamespace(ConstructorRegistry=type("ConstructorRegistry", (), {}),
                                              PrimitiveTypeInfo=object, PrimitiveConstructorSpec=object)
    sys.modules["tyro"] = tyro
    metrics = types.ModuleType("torchtitan.components.metrics")
    metrics.MetricsProcessor = object
    sys.modules["torchtitan.components.metrics"] = metrics


class TokenStream(torch.utils.data.IterableDataset):
    """Seeded random tokens, stateful the way torchtitan's HuggingFaceDataset is (sample_idx)."""

    def __init__(self, rank):
        self.rank, self.sample_idx = rank, 0

    def __iter__(self):
        while True:
            g = torch.Generator().manual_seed(1000 * self.rank + self.sample_idx)
            tokens = torch.randint(0, 64, (9,), generator=g)
            self.sample_idx += 1
            yield {"input": tokens[:-1]}, tokens[1:]

    def state_dict(self):
        return {"sample_idx": self.sample_idx}

    def load_state_dict(self, state):
        self.sample_idx = state["sample_idx"]


class TrainState:
    """What torchtitan's Trainer saves as train_state (Trainer.state_dict: {"step": ...})."""

    def __init__(self):
        self.step = 0

    def state_dict(self):
        return {"step": self.step}

    def load_state_dict(self, state):
        self.step = state["step"]


def job_config(dump_folder, model_only=False):
    from torchtitan.config_manager import JobConfig
    cfg = JobConfig()
    cfg.job.dump_folder = dump_folder
    cfg.training.steps = STEPS
    cfg.lr_scheduler.warmup_steps = 2
    cfg.checkpoint.enable_checkpoint = True
    cfg.checkpoint.interval = INTERVAL
    if model_only:
        cfg.checkpoint.last_save_model_weights_only = True
        cfg.checkpoint.export_dtype = "bfloat16"
    return cfg


def digest(t):
    return hashlib.sha256(t.detach().reshape(-1).contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()


def worker(rank, world, port, out):
    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, \
        get_optimizer_state_dict
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    install_stubs()
    from torchtitan.components.checkpoint import CheckpointManager
    from torchtitan.components.dataloader import ParallelAwareDataloader
    from torchtitan.components.ft import FTManager
    from torchtitan.components.lr_scheduler import build_lr_schedulers
    from torchtitan.components.optimizer import build_optimizers
    from torchtitan.models.llama3.model.args import TransformerModelArgs
    from torchtitan.models.llama3.model.model import Transformer

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    patch_cpu_gloo()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    args = TransformerModelArgs(dim=16, n_layers=2, n_heads=2, vocab_size=64, multiple_of=16,
                                max_seq_len=8)
    model = Transformer(args)
    model.init_weights()
    mesh = init_device_mesh("cpu", (world,))
    # As torchtitan's apply_fsdp: each block, then the root. Kept unsharded between forward and
    # backward: with the CPU stream shims a re-all-gather in backward reuses a buffer autograd saved.
    for block in model.layers.values():
        fully_shard(block, mesh=mesh, reshard_after_forward=False)
    fully_shard(model, mesh=mesh, reshard_after_forward=False)
    cfg = job_config("run")
    ft = FTManager(None)
    optimizers = build_optimizers([model], cfg, ft)
    schedulers = build_lr_schedulers(optimizers, cfg)
    loader = ParallelAwareDataloader(TokenStream(rank), dp_rank=rank, dp_world_size=world, batch_size=2)
    train_state = TrainState()
    manager = CheckpointManager(loader, [model], optimizers, schedulers, {"train_state": train_state},
                                cfg, ft)
    lrs = []
    batches = iter(loader)
    for step in range(1, STEPS + 1):
        train_state.step = step
        inputs, labels = next(batches)
        logits = model(inputs["input"])
        torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten()).backward()
        optimizers.step()
        optimizers.zero_grad()
        lrs.append([g["lr"] for g in optimizers.optimizers[0].param_groups])
        schedulers.step()
        manager.save(step, force=step == STEPS)
    manager.close()

    opt = optimizers.optimizers[0]
    full = StateDictOptions(full_state_dict=True, cpu_offload=True)
    nested = get_optimizer_state_dict(model, opt, options=full)
    model_sd = get_model_state_dict(model, options=full)

    fqn, index = NAN_AT
    param = dict(model.named_parameters())[fqn]
    if rank == 0:
        opt.state[param]["exp_avg"]._local_tensor.view(-1)[index] = float("nan")
    nan_manager = CheckpointManager(loader, [model], optimizers, schedulers, {"train_state": train_state},
                                    job_config("nan"), ft)
    nan_manager.save(STEPS, force=True)
    nan_manager.close()
    weights_manager = CheckpointManager(loader, [model], optimizers, schedulers,
                                        {"train_state": train_state}, job_config("model_only", True), ft)
    weights_manager.save(STEPS, force=True)
    weights_manager.close()

    if rank == 0:
        torch.save({"optimizer": nested, "model": model_sd}, "truth.pt")
        truth = {
            "made_by": "pytorch/torchtitan v0.1.0 CheckpointManager, pytorch/data v0.11.0, "
                       "testdata/gen/gen_torchtitan_run.py",
            "torch": torch.__version__.split("+")[0],
            "world_size": world,
            "steps": STEPS,
            "lr_used_at_step": lrs,
            "lr_saved_at_end": [g["lr"] for g in nested["param_groups"]],
            "initial_lr": [g["initial_lr"] for g in nested["param_groups"]],
            "fused": [g.get("fused") for g in nested["param_groups"]],
            "nan": {"dir": "nan/checkpoint/step-6", "fqn": fqn, "field": "exp_avg", "rank": 0,
                    "index_in_rank0_shard": index},
            "parameters": [{"fqn": k, "shape": list(v.shape), "dtype": str(v.dtype).replace("torch.", ""),
                            "sha256": digest(v)} for k, v in model_sd.items()],
            "optimizer_sha256": {f"{k}.{f}": digest(v) for k, s in nested["state"].items()
                                 for f, v in s.items()},
        }
        with open("truth.json", "w") as f:
            json.dump(truth, f, indent=1)
            f.write("\n")
    dist.barrier()
    dist.destroy_process_group()


def main():
    import shutil

    import torch.multiprocessing as mp
    sys.path[:0] = sys.argv[1].split(":")  # spawn hands sys.path to the workers
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    os.chdir(out)  # DCP records the checkpoint path as given: keep it relative
    for d in ("run", "nan", "model_only"):
        shutil.rmtree(d, ignore_errors=True)
    mp.spawn(worker, args=(2, free_port(), out), nprocs=2, join=True)
    for root, _, files in sorted(os.walk(".")):
        for f in sorted(files):
            print(os.path.join(root, f), os.path.getsize(os.path.join(root, f)))


if __name__ == "__main__":
    main()
