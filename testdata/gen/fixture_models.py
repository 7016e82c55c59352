"""The models and training loops the single-file fixtures are made with (gen_fixtures.py):
seeded, so every run makes the same values.
"""
import torch
import torch.nn as nn


class Net(nn.Module):
    """fc1/fc2 weights share a shape, and so do all the (8,) vectors: the cases where
    (data_ptr, shape) keys collide once every pointer is 0."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(16, 8)
        self.fc1 = nn.Linear(8, 8)
        self.fc2 = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, 4)

    def forward(self, idx):
        h = self.emb(idx)
        h = torch.relu(self.fc1(h))
        h = self.norm(torch.relu(self.fc2(h)))
        return self.head(h)


class TiedNet(nn.Module):
    """Language-model style: the output projection is the embedding (tied), and a
    BatchNorm contributes buffers (running stats, num_batches_tracked)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(12, 6)
        self.bn = nn.BatchNorm1d(6)
        self.out = nn.Linear(6, 12, bias=False)
        self.out.weight = self.emb.weight

    def forward(self, idx):
        return self.out(self.bn(self.emb(idx)))


class TiedLM(nn.Module):
    """A tied output projection (out.weight is emb.weight), BatchNorm buffers without
    affine parameters, and every parameter of its own shape: the case in which a model
    state_dict alone gives the optimizer's parameter order, once the tied duplicate
    and the buffers are dropped."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.proj = nn.Linear(4, 6, bias=False)
        self.bn = nn.BatchNorm1d(6, affine=False)
        self.fc = nn.Linear(6, 4, bias=False)
        self.out = nn.Linear(4, 10)
        self.out.weight = self.emb.weight

    def forward(self, idx):
        return self.out(self.fc(torch.relu(self.bn(self.proj(self.emb(idx))))))


class ConvNet(nn.Module):
    """conv1 is contiguous, conv2 channels_last: reshaping conv2's weight copies it."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3)
        self.conv2 = nn.Conv2d(4, 4, 3).to(memory_format=torch.channels_last)
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        h = torch.relu(self.conv2(torch.relu(self.conv1(x))))
        return self.head(h.mean((2, 3)))


def train_on(model, opt, make_batch, steps=3):
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x, tgt = make_batch(g)
        loss = ((model(x) - tgt) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def make_net(dtype=torch.float32):
    torch.manual_seed(0)
    return Net().to(dtype)


def batches(steps, seed=1):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        yield torch.randint(0, 16, (4, 5), generator=g), torch.randn(4, 5, 4, generator=g)


def train(model, opt, steps=3):
    dtype = next(model.parameters()).dtype
    for idx, tgt in batches(steps):
        loss = ((model(idx) - tgt.to(dtype)) ** 2).float().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
