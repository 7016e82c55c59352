"""Write the single-file checkpoint fixtures with the running torch (1.13 or 2.6).

Usage: python3 testdata/gen/gen_fixtures.py OUTDIR
Every fixture NAME gets NAME.expected.json (see describe.py); fixtures keyed by
pointers also get NAME.manifest.json (schemas/param-manifest.schema.json): the
parameters in optimizer order with the data_ptr each had when the state was keyed,
which is what a user can produce from the live model and optimizer; and
NAME.truth.json (schemas/fixture-truth.schema.json): which parameter and view
really used each state key, the answer a remap must reproduce.
Seeds are fixed, so values are reproducible; pointer values are not (they are
whatever the allocator gave this process).
"""
import json
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import describe  # noqa: E402
from fixture_models import Net, TiedNet, TiedLM, ConvNet, train_on, make_net, batches, train  # noqa: E402

TORCH2 = not torch.__version__.startswith("1.")


def inside(view, p):
    """Whether `view` lies in p's memory (a view of it) rather than in a copy."""
    begin = p.data_ptr()
    return begin <= view.data_ptr() < begin + p.numel() * p.element_size()


class PtrKeyedAdam(torch.optim.Optimizer):
    """A small Adam whose state is keyed the way HeavyBall 0.12-0.24 keyed it.

    key="ptr_shape": (view.data_ptr(), tuple(view.shape))   HeavyBall 0.12.3-0.24.4
    key="ptr":       view.data_ptr()                        HeavyBall 0.12.0-0.12.2
    key="param_view": (param, view_idx)                     HeavyBall 0.25-1.5: the key
                     holds the Parameter itself, so pickling the state pickles the weight
    fsdp=True:       every pointer reads as 0, as under FSDP, so parameters of one
                     shape share one entry and their moments mix (HeavyBall #11)
    split_rows=N:    parameters with more than N rows are split on dim 0 into views of
                     N rows (the last may be shorter); each view has its own state at
                     its own, offset, pointer, as HeavyBall's split=True did.
    merge_dims=True: parameters of more than 2 dims are seen as (rows, -1) through
                     .reshape(), as HeavyBall 0.24's dim merger did: a view at the
                     parameter's pointer when it is contiguous, but a fresh copy for a
                     channels_last weight, so that state is keyed by a temporary's
                     pointer and never reaches the parameter (recorded in the truth as
                     temporary_of: an orphan a remap must not attach to anything).
    adamw_fields=True: a per-entry `step` tensor beside exp_avg/exp_avg_sq, the fields
                     torch.optim.AdamW keeps, so a real AdamW can load the remapped state.
    soap_fields=True: the non-tensor state HeavyBall's SOAP/PSGD entries carry beside the
                     moments: an int `step`, per-dim preconditioner lists with `[]` for
                     skipped dims, (torch.Size, tensor) pairs and a tuple of einsum strings.
    state_dtype:     dtype the moments are stored in (HeavyBall's storage_dtype); the
                     arithmetic is float32 either way.
    The step counter lives in the group ("k"), as in HeavyBall's Foreach* optimizers.
    """

    def __init__(self, params, lr=1e-2, betas=(0.9, 0.99), eps=1e-8, key="ptr_shape",
                 fsdp=False, split_rows=None, merge_dims=False, adamw_fields=False,
                 soap_fields=False, state_dtype=torch.float32):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, k=0))
        self.key, self.fsdp, self.split_rows = key, fsdp, split_rows
        self.merge_dims, self.adamw_fields, self.soap_fields = merge_dims, adamw_fields, soap_fields
        self.state_dtype = state_dtype
        self.names = {}      # id(param) -> name, set by the caller; for the truth record
        self.truth = {}      # state key -> [(param name, view index)] that used it
        self.temporary = {}  # state key -> name of the parameter whose temporary copy it was
        self.copies = []     # the temporary copies, kept alive (see step)

    def views(self, t):
        """The views of a parameter's data (or its grad) that get their own state."""
        if self.merge_dims and t.dim() > 2:
            return [t.reshape(t.shape[0], -1)]
        if self.split_rows and t.dim() >= 1 and t.shape[0] > self.split_rows:
            return list(t.split(self.split_rows, dim=0))
        return [t]

    def state_key(self, view, param=None, index=0):
        if self.key == "param_view":
            return (param, index)
        ptr = 0 if self.fsdp else view.data_ptr()
        return ptr if self.key == "ptr" else (ptr, tuple(view.shape))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            group["k"] += 1
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                for i, (view, grad) in enumerate(zip(self.views(p.data), self.views(p.grad))):
                    key = self.state_key(view, p, i)
                    if not inside(view, p):
                        self.temporary[key] = self.names.get(id(p))
                        # HeavyBall freed the copy, and the allocator may or may not hand
                        # the same address out again next step; keeping it alive makes
                        # every step's copy a new key, so the fixture is reproducible.
                        self.copies.append(view)
                    else:
                        used_by = self.truth.setdefault(key, [])
                        if (self.names.get(id(p)), i) not in used_by:
                            used_by.append((self.names.get(id(p)), i))
                    st = self.state[key]
                    if not st:
                        if self.adamw_fields:
                            st["step"] = torch.tensor(0.0)
                        st["exp_avg"] = torch.zeros_like(view, dtype=self.state_dtype,
                                                         memory_format=torch.contiguous_format)
                        st["exp_avg_sq"] = torch.zeros_like(view, dtype=self.state_dtype,
                                                            memory_format=torch.contiguous_format)
                    if self.soap_fields:
                        if "step" not in st:
                            rows = view.shape[0]
                            st["step"] = 0
                            st["GG"] = [torch.zeros(rows, rows), []] if view.dim() == 2 else [[]]
                            st["Q"] = [(torch.Size([rows]), torch.ones(rows * (rows + 1) // 2)), None]
                            st["exprs"] = ("ab,cb->ac", ("ab,ab->b",), "a,b->ab")
                        st["step"] += 1
                        if view.dim() == 2:
                            st["GG"][0].add_(grad @ grad.T)
                    if self.adamw_fields:
                        st["step"] += 1
                    m = st["exp_avg"].float().mul_(b1).add_(grad, alpha=1 - b1)
                    v = st["exp_avg_sq"].float().mul_(b2).addcmul_(grad, grad, value=1 - b2)
                    st["exp_avg"].copy_(m)
                    st["exp_avg_sq"].copy_(v)
                    denom = (v / (1 - b2 ** group["k"])).sqrt_().add_(group["eps"])
                    view.addcdiv_(m, denom, value=-group["lr"] / (1 - b1 ** group["k"]))


def ptr_keyed(model, **kwargs):
    opt = PtrKeyedAdam(model.parameters(), **kwargs)
    opt.names = {id(p): n for n, p in model.named_parameters()}
    return opt


def truth(opt):
    """Which parameter (and view) really used each state key, in state order: what a
    correct remap must reproduce. A key used by several parameters is a collision; a
    key of a temporary copy is used by none (temporary_of names whose copy it was)."""
    keys = []
    for k in opt.state_dict()["state"].keys():
        if k in opt.temporary:
            keys.append({"used_by": [], "temporary_of": opt.temporary[k]})
        else:
            keys.append({"used_by": [{"param": n, "view": v} for n, v in opt.truth[k]]})
    return {"format": "optstate-fixture-truth", "version": 1, "keys": keys}


def manifest(model, opt):
    names = {id(p): n for n, p in model.named_parameters()}
    params = []
    for group in opt.param_groups:
        for p in group["params"]:
            params.append({"name": names[id(p)], "shape": list(p.shape),
                           "dtype": str(p.dtype).replace("torch.", ""),
                           "data_ptr": p.data_ptr(), "nbytes": p.numel() * p.element_size()})
    return {"format": "optstate-param-manifest", "version": 1, "params": params}


def fqn_keyed(model, opt):
    """get_optimizer_state_dict's layout: state and params keyed by FQN. torch 2.x
    builds it with torch.distributed.checkpoint.state_dict itself; 1.13 has no such
    module, so there the same layout is built from named_parameters."""
    if TORCH2:
        from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict
        return get_optimizer_state_dict(model, opt)
    sd = opt.state_dict()
    names = [n for n, _ in model.named_parameters()]
    return {"state": {names[i]: v for i, v in sd["state"].items()},
            "param_groups": [dict(g, params=[names[i] for i in g["params"]])
                             for g in sd["param_groups"]]}


def flat_shared(opt_sd):
    """Moments of all parameters as views into one flat buffer per kind, as flat-
    buffer optimizers (apex, FSDP1) hold them: many tensors, one storage each."""
    out = {"state": {}, "param_groups": opt_sd["param_groups"]}
    for name in ("exp_avg", "exp_avg_sq"):
        parts = [st[name] for st in opt_sd["state"].values()]
        flat = torch.cat([t.reshape(-1) for t in parts])
        offset = 0
        for idx, t in zip(opt_sd["state"].keys(), parts):
            view = flat[offset:offset + t.numel()].view(t.shape)
            out["state"].setdefault(idx, {"step": opt_sd["state"][idx]["step"]})[name] = view
            offset += t.numel()
    return out


def build_all():
    """Yield (name, object to save, covers, save kwargs, (manifest, truth) or None)."""
    m = make_net()
    o = torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01)
    train(m, o)
    adamw_sd = o.state_dict()
    yield "adamw_index.pt", adamw_sd, "torch.optim.AdamW state, canonical int keys", {}, None
    yield ("adamw_legacy.pt", adamw_sd, "adamw_index in the legacy non-zip format",
           {"_use_new_zipfile_serialization": False}, None)
    yield ("string_index.pt",
           {"state": {str(k): v for k, v in adamw_sd["state"].items()},
            "param_groups": adamw_sd["param_groups"]},
           "AdamW state keyed '0','1',... as a DCP round trip returns it", {}, None)
    yield "fqn_state.pt", fqn_keyed(m, o), "AdamW state keyed by FQN (DSD layout)", {}, None
    yield ("shared_storage.pt", flat_shared(adamw_sd),
           "moments as views of one flat buffer per kind (storage sharing)", {}, None)

    m = make_net()
    o = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    train(m, o)
    yield "sgd_momentum_index.pt", o.state_dict(), "SGD momentum_buffer state", {}, None

    m = make_net()
    o = torch.optim.Adagrad(m.parameters(), lr=0.1)
    train(m, o)
    yield "adagrad_index.pt", o.state_dict(), "Adagrad step/sum state", {}, None

    m = make_net(torch.bfloat16)
    o = torch.optim.AdamW(m.parameters(), lr=1e-2)
    train(m, o)
    yield "adamw_bf16.pt", o.state_dict(), "AdamW on bfloat16 params: bf16 moments", {}, None

    # torch 1.13 cannot run float16 layers on CPU, so float16 state comes the way
    # HeavyBall made it: float32 params, moments stored as float16.
    m = make_net()
    o = ptr_keyed(m, key="ptr_shape", state_dtype=torch.float16)
    train(m, o)
    yield ("ptr_shape_fp16.pt", o.state_dict(), "(data_ptr, shape) keys with float16 moments",
           {}, (manifest(m, o), truth(o)))

    m = make_net()
    o = ptr_keyed(m, key="ptr_shape", split_rows=6)
    train(m, o)
    yield ("heavyball_ptr_shape.pt", o.state_dict(),
           "HeavyBall 0.12.3-0.24 (data_ptr, shape) keys; params over 6 rows split into 6-row views (emb 6+6+4)",
           {}, (manifest(m, o), truth(o)))

    m = make_net()
    o = ptr_keyed(m, key="ptr")
    train(m, o)
    yield ("heavyball_bare_ptr.pt", o.state_dict(), "HeavyBall 0.12.0-0.12.2 bare data_ptr keys",
           {}, (manifest(m, o), truth(o)))

    m = make_net()
    o = ptr_keyed(m, key="ptr_shape", fsdp=True)
    train(m, o)
    yield ("heavyball_fsdp_collision.pt", o.state_dict(),
           "FSDP: every pointer 0, same-shape params share one mixed entry",
           {}, (manifest(m, o), truth(o)))

    m = make_net()
    o = ptr_keyed(m, key="param_view", split_rows=6)
    train(m, o)
    yield ("heavyball_param_view.pt", {"model": m.state_dict(), "optimizer": o.state_dict()},
           "HeavyBall 0.25-1.5 (Parameter, view_idx) keys saved with the model in one file",
           {}, (manifest(m, o), truth(o)))

    torch.manual_seed(0)
    m = TiedLM()
    o = ptr_keyed(m, key="ptr_shape", adamw_fields=True)
    train_on(m, o, lambda g: (torch.randint(0, 10, (8,), generator=g), torch.randn(8, 10, generator=g)))
    yield ("heavyball_tied.pt", {"model": m.state_dict(), "optimizer": o.state_dict()},
           "(data_ptr, shape) keys with AdamW's field names, saved with a model that has a tied "
           "weight and BatchNorm buffers; every parameter of its own shape",
           {}, (manifest(m, o), truth(o)))
    yield ("heavyball_tied_model.pt", m.state_dict(), "heavyball_tied.pt's model state_dict alone", {}, None)

    torch.manual_seed(0)
    m = ConvNet()
    o = ptr_keyed(m, key="ptr_shape", merge_dims=True, soap_fields=True)
    train_on(m, o, lambda g: (torch.randn(2, 3, 8, 8, generator=g), torch.randn(2, 2, generator=g)))
    yield ("heavyball_orphan.pt", o.state_dict(),
           "HeavyBall 0.24 merge_dims: conv weights keyed as (rows, -1); the channels_last one through "
           "a reshape copy, so its state is keyed by a freed temporary (orphans); SOAP/PSGD-style "
           "non-tensor state (int step, lists with [] placeholders, torch.Size pairs, einsum strings)",
           {}, (manifest(m, o), truth(o)))

    # DCP builds optimizer state by one step with zero gradients at lr=0
    # (torch.distributed.checkpoint.state_dict's _init_optim_state): a file saved
    # right after that has step 1 and all-zero moments that never trained anything.
    m = make_net()
    o = torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01)
    for p in m.parameters():
        p.grad = torch.zeros_like(p)
    lr = o.param_groups[0]["lr"]
    o.param_groups[0]["lr"] = 0.0
    o.step()
    o.param_groups[0]["lr"] = lr
    yield ("dcp_init_untrained.pt", {"model": m.state_dict(), "optimizer": o.state_dict()},
           "AdamW state from DCP's init step only (zero grads, lr=0): step 1, all-zero moments", {}, None)

    yield ("meta_tensors.pt", {"weight": torch.empty(4, 3, device="meta"),
                               "bias": torch.empty(4, device="meta", dtype=torch.float16)},
           "meta tensors (no storage)", {}, None)
    if TORCH2:
        torch.manual_seed(0)
        yield ("new_dtypes.pt",
               {"float8_e4m3fn": torch.randn(5).to(torch.float8_e4m3fn),
                "float8_e5m2": torch.randn(2, 3).to(torch.float8_e5m2),
                "uint16": torch.arange(6, dtype=torch.int32).to(torch.uint16).view(2, 3),
                "uint32": torch.tensor([1, 2, 4000000000], dtype=torch.int64).to(torch.uint32),
                "bfloat16": torch.randn(3).to(torch.bfloat16)},
               "dtypes without a legacy storage class: UntypedStorage + _rebuild_tensor_v3", {}, None)

    m = make_net()
    decay = [p for n, p in m.named_parameters() if n.endswith("weight") and "norm" not in n]
    no_decay = [p for n, p in m.named_parameters() if not (n.endswith("weight") and "norm" not in n)]
    o = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                           {"params": no_decay, "weight_decay": 0.0}], lr=1e-3)
    train(m, o)
    yield ("combined.pt",
           {"model": m.state_dict(), "optimizer": o.state_dict(), "epoch": 3, "global_step": 120,
            "config": {"lr": 1e-3, "betas": (0.9, 0.999), "name": "net"}},
           "{model, optimizer, ...} in one file; two param groups", {}, None)

    torch.manual_seed(0)
    t = TiedNet()
    t(torch.randint(0, 12, (8,)))  # one forward in train mode: buffers move
    yield "model_tied.pt", t.state_dict(), "model state_dict: tied weights, buffers", {}, None


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, obj, covers, kwargs, man in build_all():
        path = os.path.join(out, name)
        torch.save(obj, path, **kwargs)
        describe.write_expected(path, covers)
        if man is not None:
            for suffix, doc in zip((".manifest.json", ".truth.json"), man):
                with open(os.path.join(out, name.replace(".pt", suffix)), "w") as f:
                    json.dump(doc, f, indent=1)
                    f.write("\n")
        print(f"{path}: {os.path.getsize(path)} bytes", flush=True)


if __name__ == "__main__":
    main()
