"""The model, the optimizer classes and variants, and the seeded training that the enumerated
corpus (gen_enumerated_corpus.py) is made of: every torch.optim class found by introspection,
each variant read off its constructor's signature.
"""
import inspect

import torch
from torch import nn

STEPS = 3
NONZERO = 0.1  # what a zero-default numeric parameter is set to


class Net(nn.Module):
    def __init__(self, sparse=False, names=("conv", "emb", "fc1", "fc2", "frozen")):
        super().__init__()
        self.names = names
        mods = [nn.Conv2d(2, 3, 3), nn.Embedding(10, 4, sparse=sparse), nn.Linear(27, 6), nn.Linear(6, 3),
                nn.Linear(3, 3)]
        for name, m in zip(names, mods):
            self.add_module(name, m)
        getattr(self, names[4]).requires_grad_(False)
        self.unused = nn.Parameter(torch.randn(5))

    def forward(self, x, idx):
        conv, emb, fc1, fc2, frozen = (getattr(self, n) for n in self.names)
        h = fc1(conv(x).flatten(1)) + emb(idx).sum(dim=(1, 2)).unsqueeze(1)
        return frozen(fc2(torch.relu(h)))


def optimizer_classes():
    seen, out = set(), []

    def walk(c):
        for s in c.__subclasses__():
            if s not in seen:
                seen.add(s)
                walk(s)
    walk(torch.optim.Optimizer)
    for c in seen:
        # Public: torch.optim.<Name> is this class (torch 1.13's _multi_tensor copies are not).
        if getattr(torch.optim, c.__name__, None) is c:
            out.append(c)
    return sorted(out, key=lambda c: c.__name__)


def constructor_params(cls):
    return [p for n, p in inspect.signature(cls.__init__).parameters.items() if n not in ("self", "params")]


def bool_names(classes):
    """Names some class of this torch defaults to a bool or annotates as one."""
    out = set()
    for c in classes:
        for p in constructor_params(c):
            if isinstance(p.default, bool) or "bool" in str(p.annotation):
                out.add(p.name)
    return out


def variants(cls, flags):
    params = constructor_params(cls)
    # A required lr (1.13 marks it with a sentinel object, 2.x leaves it empty) gets 0.01.
    base = {p.name: 0.01 for p in params if p.name == "lr" and not isinstance(p.default, (int, float))}
    zeros = [p.name for p in params
             if not isinstance(p.default, bool) and isinstance(p.default, (int, float)) and p.default == 0]
    out = [("default", [dict(base)])]
    for p in params:
        if isinstance(p.default, bool):
            value = not p.default
        elif p.default is None and p.name in flags:
            value = True
        else:
            continue
        first = dict(base, **{p.name: value})
        out.append((p.name, [first] + [dict(first, **{z: NONZERO}) for z in zeros]))
    for z in zeros:
        out.append((z, [dict(base, **{z: NONZERO})]))
    out.append(("groups3", [dict(base)]))
    return out


def batches(seed):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(8, 2, 5, 5, generator=g), torch.randint(0, 10, (8, 2), generator=g),
             torch.randn(8, 3, generator=g)) for _ in range(STEPS)]


def groups_of(net, three, lr):
    params = list(net.parameters())
    if not three:
        return params
    named = dict(net.named_parameters())
    first = [p for n, p in named.items() if n.startswith(net.names[0])]
    second = [p for n, p in named.items() if n.startswith((net.names[1], net.names[2])) or n == "unused"]
    rest = [p for p in params if all(p is not q for q in first + second)]
    return [{"params": first}, {"params": second, "lr": lr * 0.5}, {"params": rest, "lr": lr * 0.25}]


def build(cls, kwargs, three=False, sparse=False):
    """The seeded model and its optimizer (beside an Adam for the rest when gradients are sparse)."""
    torch.manual_seed(0)
    net = Net(sparse=sparse)
    lr = kwargs.get("lr", inspect.signature(cls.__init__).parameters["lr"].default)
    lr = lr if isinstance(lr, (int, float)) else 0.01
    if sparse:
        emb = getattr(net, net.names[1])
        opt = cls(list(emb.parameters()), **kwargs)
        others = [p for p in net.parameters() if all(p is not q for q in emb.parameters())]
        dense = torch.optim.Adam(others, lr=1e-3)
    else:
        opt = cls(groups_of(net, three, lr), **kwargs)
        dense = None
    return net, opt, dense


def step(net, opt, dense, batch):
    """One step through a closure, as LBFGS needs and every optimizer takes."""
    x, idx, y = batch

    def closure():
        opt.zero_grad()
        if dense is not None:
            dense.zero_grad()
        loss = nn.functional.mse_loss(net(x, idx), y)
        loss.backward()
        return loss
    opt.step(closure)
    if dense is not None:
        dense.step()


def train(cls, kwargs, three=False, sparse=False):
    net, opt, dense = build(cls, kwargs, three, sparse)
    for batch in batches(1):
        step(net, opt, dense, batch)
    return net, opt, dense


def param_table(net, opt):
    """Each parameter in optimizer order: its name, shape and whether the optimizer holds state for it."""
    names = {id(p): n for n, p in net.named_parameters()}
    rows = []
    for gi, g in enumerate(opt.param_groups):
        for p in g["params"]:
            rows.append({"name": names[id(p)], "shape": list(p.shape), "dtype": str(p.dtype).replace("torch.", ""),
                         "group": gi, "has_state": len(opt.state.get(p, {})) > 0})
    return rows


def non_finite_state(opt):
    """Fields of the live state that hold NaN or infinity (torch 1.13's foreach RAdam writes them)."""
    out = []
    names = {id(p): i for i, p in enumerate(p for g in opt.param_groups for p in g["params"])}
    for p, st in opt.state.items():
        for field, v in st.items():
            if isinstance(v, torch.Tensor) and v.is_floating_point() and not torch.isfinite(v).all():
                out.append(f"state[{names.get(id(p), '?')}].{field}")
    return out


def first_line(e):
    text = f"{type(e).__name__}: {e}".strip().splitlines()
    return text[0][:300] if text else type(e).__name__
