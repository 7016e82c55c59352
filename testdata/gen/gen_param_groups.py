"""Checkpoints with several param groups and frozen parameters, grouped the way the common training
stacks group them (issue 19, item 5: the order must be decided from the file, without a manifest).

Usage: gen_param_groups.py OUTDIR
  run with torch 1.13 (/usr/bin/python3) and torch 2.6 (testdata/gen/torch26-python.sh).
Each case is torch.optim trained 3 seeded steps and saved as {model, optimizer}; beside it
<case>.manifest.json records the truth: every parameter in optimizer order with its group, written
from the live optimizer (the manifest a training script would write). The groupings follow each
project's rule (their code is not used or copied):
  hf_decay_split      AdamW; HF Trainer's rule: weight decay for every parameter except biases and
                      LayerNorm weights, decay group first (transformers' get_decay_parameter_names)
  timm_ndim_split     AdamW; timm's param_groups_weight_decay rule: no decay for ndim <= 1 and
                      '.bias' names, that group first
  torchvision_norm    SGD momentum (the reference recipe's default); torchvision's set_weight_decay
                      with norm_weight_decay: norm-layer parameters in their own group, others
                      first; ResNet-style conv without bias before a BatchNorm
  frozen_embedding    AdamW over the parameters that require grad: the embedding frozen (its shape
                      is no other parameter's, so the assignment is unique)
  frozen_and_split    the frozen embedding and HF's decay split together
  frozen_ambiguous    embedding and first projection frozen: the projection has the same shapes as
                      the trained one, so several assignments fit the file (it must be refused,
                      naming the parameters)
  many_buffers        AdamW, torchvision's norm split, over 20 conv + BatchNorm blocks: 60 buffers
                      (reports must wrap the list)
"""
import json
import os
import sys

import torch
from torch import nn


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.q = nn.Linear(8, 8)
        self.k = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        h = self.emb(x)
        h = self.norm(torch.tanh(self.q(h)) + self.k(h))
        return self.head(h).mean(dim=1)


class ConvBn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 6 * 6, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))


def hf_groups(model, wd=0.01):
    decay = [n for mod_name, mod in model.named_modules() for n, _ in mod.named_parameters(recurse=False)
             if not isinstance(mod, nn.LayerNorm) and n != "bias"
             for n in [f"{mod_name}.{n}" if mod_name else n]]
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    return [{"params": [p for n, p in named if n in decay], "weight_decay": wd},
            {"params": [p for n, p in named if n not in decay], "weight_decay": 0.0}]


def timm_groups(model, wd=0.05):
    no_decay, decay = [], []
    for n, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if p.ndim <= 1 or n.endswith(".bias") else decay).append(p)
    return [{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": wd}]


def torchvision_groups(model, wd=1e-4, norm_wd=0.0):
    other, norm = [], []

    def add(module):
        for _, p in module.named_parameters(recurse=False):
            if p.requires_grad:
                (norm if isinstance(module, nn.modules.batchnorm._BatchNorm) else other).append(p)
        for child in module.children():
            add(child)

    add(model)
    return [{"params": other, "weight_decay": wd}, {"params": norm, "weight_decay": norm_wd}]


class Blocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(*[nn.Sequential(nn.Conv2d(3, 3, 1, bias=False), nn.BatchNorm2d(3))
                                      for _ in range(20)])
        self.fc = nn.Linear(3 * 8 * 8, 10)

    def forward(self, x):
        return self.fc(self.blocks(x).flatten(1))


def trainable(model):
    return [p for p in model.parameters() if p.requires_grad]


def manifest(model, opt):
    names = {id(p): n for n, p in model.named_parameters()}
    params = []
    for gi, group in enumerate(opt.param_groups):
        for p in group["params"]:
            params.append({"name": names[id(p)], "shape": list(p.shape), "dtype": str(p.dtype).replace("torch.", ""),
                           "group": gi})
    return {"format": "optstate-param-manifest", "version": 1, "params": params}


def train(model, opt, conv):
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        if conv:
            x, y = torch.randn(4, 3, 8, 8, generator=g), torch.randint(0, 10, (4,), generator=g)
            nn.functional.cross_entropy(model(x), y).backward()
        else:
            x = torch.randint(0, 20, (4, 5), generator=g)
            model(x).square().mean().backward()
        opt.step()
        opt.zero_grad()


def cases():
    torch.manual_seed(0)
    m = Tiny()
    yield "hf_decay_split", m, torch.optim.AdamW(hf_groups(m), lr=1e-3), False
    torch.manual_seed(0)
    m = Tiny()
    yield "timm_ndim_split", m, torch.optim.AdamW(timm_groups(m), lr=1e-3), False
    torch.manual_seed(0)
    m = ConvBn()
    yield "torchvision_norm", m, torch.optim.SGD(torchvision_groups(m), lr=0.1, momentum=0.9), True
    torch.manual_seed(0)
    m = Tiny()
    m.emb.requires_grad_(False)
    yield "frozen_embedding", m, torch.optim.AdamW(trainable(m), lr=1e-3), False
    torch.manual_seed(0)
    m = Tiny()
    m.emb.requires_grad_(False)
    yield "frozen_and_split", m, torch.optim.AdamW(hf_groups(m), lr=1e-3), False
    torch.manual_seed(0)
    m = Tiny()
    m.emb.requires_grad_(False)
    m.q.requires_grad_(False)
    yield "frozen_ambiguous", m, torch.optim.AdamW(trainable(m), lr=1e-3), False
    torch.manual_seed(0)
    m = Blocks()
    yield "many_buffers", m, torch.optim.AdamW(torchvision_groups(m), lr=1e-3), True


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, model, opt, conv in cases():
        train(model, opt, conv)
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, os.path.join(out, name + ".pt"))
        with open(os.path.join(out, name + ".manifest.json"), "w") as f:
            json.dump(manifest(model, opt), f, indent=1)
            f.write("\n")
    print(torch.__version__, sorted(os.listdir(out)))


if __name__ == "__main__":
    main()
