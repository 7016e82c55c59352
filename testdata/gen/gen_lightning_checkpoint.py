"""A real PyTorch Lightning checkpoint: what Trainer.save_checkpoint writes beside the state dicts.

Usage (torch 2.6 chroot): gen_lightning_checkpoint.py SRC[:SRC...] OUTDIR
SRC: the src/ folders of Lightning-AI/pytorch-lightning tag 2.6.5, Lightning-AI/utilities v0.15.3
and Lightning-AI/torchmetrics v1.8.2, extracted outside the project (git archive TAG src); their
other imports (tqdm, PyYAML, fsspec, packaging, typing-extensions, aiohttp) from Debian trixie.
A LightningModule with save_hyperparameters (an int, a float, a str, a nested dict) trains 6
seeded steps of AdamW with a StepLR schedule on CPU; Trainer.save_checkpoint writes
OUTDIR/lightning_2.6.5/step6.ckpt: state_dict, optimizer_states, lr_schedulers, loops, callbacks,
hyper_parameters (Lightning's AttributeDict), hparams_name and the version.
"""
import os
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

sys.path[:0] = sys.argv[1].split(":")
import lightning.pytorch as pl  # noqa: E402


class Regressor(pl.LightningModule):
    def __init__(self, hidden=8, lr=1e-2, name="tiny", schedule=None):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(4, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def training_step(self, batch, _):
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)
        return {"optimizer": opt, "lr_scheduler": torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)}


def main():
    out = os.path.join(sys.argv[2], "lightning_2.6.5")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(48, 4), torch.randn(48, 1))
    model = Regressor(schedule={"kind": "step", "every": 2})
    trainer = pl.Trainer(max_steps=6, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, default_root_dir=out)
    trainer.fit(model, DataLoader(data, batch_size=8))
    trainer.save_checkpoint(os.path.join(out, "step6.ckpt"))
    print(f"{out}/step6.ckpt")


if __name__ == "__main__":
    main()
