"""Checkpoints saved by the frameworks themselves: accelerate's save_state and Lightning's Trainer.

Usage (torch 2.6 chroot; framework-fixtures.sh extracts the sources and runs this):
  python3 testdata/gen/gen_framework_runs.py SRC_DIRS OUTDIR
    SRC_DIRS  colon-separated source roots put first on sys.path (accelerate v1.14.0 and
              huggingface_hub v0.36.2; pytorch-lightning 2.5.6, lightning-utilities v0.14.3,
              torchmetrics v1.8.2): their code runs here and is never committed.
Writes under OUTDIR:
  accelerate_1.14.0/save_state/      Accelerator(cpu=True).save_state after 3 steps of AdamW
                                     with a weight-decay split (two groups) and a LambdaLR:
                                     model.safetensors, optimizer.bin, scheduler.bin, random_states_0.pkl
  accelerate_1.14.0/save_state_nan/  the same directory with a NaN in 1.weight's exp_avg in optimizer.bin
  lightning_2.5.6/adamw.ckpt         Trainer(max_steps=3).fit on CPU with AdamW + StepLR, saved by its
                                     ModelCheckpoint callback (state_dict, optimizer_states, lr_schedulers, ...)
  lightning_2.5.6/sgd.ckpt           the same with SGD(momentum=0.9) and two param groups
  lightning_2.5.6/adamw_nan.ckpt     adamw.ckpt with a NaN in one exp_avg
truth.json beside them: the framework versions, each file's parameter names in the optimizer's
order, and the spoiled entries.
"""
import glob
import os
import shutil
import sys

sys.path[:0] = sys.argv[1].split(":")
OUT = sys.argv[2]

import torch  # noqa: E402
from fixture_io import write_json  # noqa: E402


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.LayerNorm(8), torch.nn.ReLU(), torch.nn.Linear(8, 3))


def decay_split(model, weight_decay):
    """HF's rule: no decay for biases and LayerNorm weights, the decay group first."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if name.endswith("bias") or name.startswith("1.") else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def plant_nan(path, loader_key=None, index=0):
    """A NaN in element 1 of state[index]'s exp_avg of the optimizer state at `path` (in place, a copy)."""
    sd = torch.load(path, map_location="cpu", weights_only=False)
    opt = sd if loader_key is None else sd[loader_key][0]
    opt["state"][index]["exp_avg"].view(-1)[1] = float("nan")
    torch.save(sd, path)
    return index


def accelerate_run(truth):
    import accelerate
    from accelerate import Accelerator
    from accelerate.utils import set_seed

    set_seed(11)
    acc = Accelerator(cpu=True)
    model = mlp()
    opt = torch.optim.AdamW(decay_split(model, 0.01), lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 - s / 10)
    model, opt, sched = acc.prepare(model, opt, sched)
    for _ in range(3):
        x, y = torch.randn(16, 6), torch.randn(16, 3)
        loss = torch.nn.functional.mse_loss(model(x), y)
        acc.backward(loss)
        opt.step()
        sched.step()
        opt.zero_grad()
    base = os.path.join(OUT, f"accelerate_{accelerate.__version__}")
    out = os.path.join(base, "save_state")
    acc.save_state(out)
    nan = os.path.join(base, "save_state_nan")
    shutil.copytree(out, nan)
    # In 1.weight, one of three [8] parameters: safetensors' sorted header cannot say which.
    spoiled = plant_nan(os.path.join(nan, "optimizer.bin"), index=3)
    names = [n for n, _ in mlp().named_parameters()]
    order = [n for n in names if not (n.endswith("bias") or n.startswith("1."))] + \
            [n for n in names if n.endswith("bias") or n.startswith("1.")]
    truth["accelerate"] = accelerate.__version__
    truth["files"][os.path.relpath(out, OUT)] = {"files": sorted(os.listdir(out)), "optimizer_order": order,
                                                  "nan": None}
    truth["files"][os.path.relpath(nan, OUT)] = {"files": sorted(os.listdir(nan)), "optimizer_order": order,
                                                  "nan": order[spoiled]}


def lightning_run(truth):
    import lightning
    from lightning.pytorch import LightningModule, Trainer, seed_everything
    from lightning.pytorch.callbacks import ModelCheckpoint

    class Net(LightningModule):
        def __init__(self, algorithm):
            super().__init__()
            self.algorithm = algorithm
            self.net = mlp()

        def training_step(self, batch, _):
            x, y = batch
            return torch.nn.functional.mse_loss(self.net(x), y)

        def configure_optimizers(self):
            if self.algorithm == "sgd":
                opt = torch.optim.SGD(decay_split(self.net, 1e-4), lr=0.05, momentum=0.9)
            else:
                opt = torch.optim.AdamW(self.parameters(), lr=1e-2)
            return {"optimizer": opt, "lr_scheduler": torch.optim.lr_scheduler.StepLR(opt, step_size=2)}

    base = os.path.join(OUT, f"lightning_{lightning.__version__}")
    os.makedirs(base, exist_ok=True)
    for algorithm in ("adamw", "sgd"):
        seed_everything(12, verbose=False)
        data = torch.utils.data.TensorDataset(torch.randn(48, 6), torch.randn(48, 3))
        loader = torch.utils.data.DataLoader(data, batch_size=16)
        work = os.path.join(base, f".run-{algorithm}")
        ckpt = ModelCheckpoint(dirpath=work, save_last=False)
        trainer = Trainer(max_steps=3, accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                          enable_model_summary=False, callbacks=[ckpt], default_root_dir=work)
        trainer.fit(Net(algorithm), loader)
        saved = glob.glob(os.path.join(work, "*.ckpt"))
        assert len(saved) == 1, saved
        path = os.path.join(base, f"{algorithm}.ckpt")
        shutil.move(saved[0], path)
        shutil.rmtree(work)
        names = [f"net.{n}" for n, _ in mlp().named_parameters()]
        if algorithm == "sgd":
            order = [n for n in names if not (n.endswith("bias") or n.startswith("net.1."))] + \
                    [n for n in names if n.endswith("bias") or n.startswith("net.1.")]
        else:
            order = names
        truth["files"][os.path.relpath(path, OUT)] = {"optimizer_order": order, "nan": None}
        if algorithm == "adamw":
            nan = os.path.join(base, "adamw_nan.ckpt")
            shutil.copy(path, nan)
            spoiled = plant_nan(nan, "optimizer_states")
            truth["files"][os.path.relpath(nan, OUT)] = {"optimizer_order": order, "nan": order[spoiled]}
    truth["lightning"] = lightning.__version__


def main():
    os.makedirs(OUT, exist_ok=True)
    truth = {"torch": str(torch.__version__), "files": {}}
    accelerate_run(truth)
    lightning_run(truth)
    write_json(os.path.join(OUT, "truth.json"), truth, sort_keys=True)
    print(f"{OUT}: {len(truth['files'])} checkpoints")


if __name__ == "__main__":
    main()
