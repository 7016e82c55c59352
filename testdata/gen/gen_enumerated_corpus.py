"""The enumerated corpus: checkpoints of every torch.optim class and save option this torch has.

Usage: python3 testdata/gen/gen_enumerated_corpus.py OUTDIR     (torch 1.13 and 2.6)

Nothing here is a list of cases typed by hand. The optimizers are every public subclass of
torch.optim.Optimizer this torch ships (found by walking __subclasses__, so a new torch adds its
new classes); the variants of each are read off its constructor's signature:
  default       the defaults (a required lr gets 0.01)
  <flag>        each flag flipped: a parameter whose default is a bool, or None where this torch
                types or defaults it as a bool somewhere (foreach, fused, capturable, ...)
  <name>        each numeric parameter whose default is 0 set to 0.1 (momentum, weight_decay, ...)
  groups3       three param groups of different lr
A flag that the constructor or a step refuses alone is tried once more with each zero-default
parameter set (nesterov needs momentum); what still fails on this CPU is listed in corpus.json
under "skipped" with torch's own error, never silently dropped. An optimizer whose step refuses
dense gradients (SparseAdam) is run on the model's embedding with sparse gradients, beside an
Adam over the rest, as users combine them.

The model (`Net`): conv Conv2d(2, 3, 3), emb Embedding(10, 4), fc1 Linear(27, 6), fc2 Linear(6, 3),
frozen Linear(3, 3) (requires_grad False, still listed in the optimizer), unused (a parameter
the forward never reads). 3 seeded steps, each through a closure (LBFGS needs one), then
torch.save({"model": state_dict, "optimizer": state_dict}).

The faults are seeded edits of copies of one healthy AdamW save, each with the rule that must
find it (corpus.json "expect_rule"): a NaN, a zeroed entry, two entries of different shapes
swapped, an entry dropped, lr 0 after steps, one entry's step moved, the file truncated, one bit
of a storage flipped.

The save options are every way torch.save can write the same AdamW run: pickle_protocol 2 to
HIGHEST_PROTOCOL, zip and legacy (_use_new_zipfile_serialization=False), and where this torch
has them, set_crc32_options(False), skip_data(), _disable_byteorder_record, a BytesIO buffer;
and the model shapes users meet: a non-contiguous parameter, tied weights (one storage, two
names), non-ASCII and 200-character module names.

Beside each <case>.pt: <case>.pt.expected.json (describe.py: what torch.load shows). corpus.json
lists every case with what the run knows: the class, its arguments, each parameter in optimizer
order with whether it has state, and the save option.
"""
import copy
import inspect
import io
import os
import struct
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import describe  # noqa: E402
from enumerate_training import Net, optimizer_classes, bool_names, variants, batches, step, train, param_table, non_finite_state, first_line  # noqa: E402
from enumerate_schedulers import scheduler_classes, scheduler_cases  # noqa: E402
from fixture_io import write_json  # noqa: E402

def optimizer_cases(out, cases, skipped):
    classes = optimizer_classes()
    flags = bool_names(classes)
    for cls in classes:
        sparse = False
        for variant, tries in variants(cls, flags):
            name = f"{cls.__name__.lower()}_{variant}"
            errors = []
            for kwargs in tries:
                try:
                    net, opt, dense = train(cls, kwargs, three=variant == "groups3", sparse=sparse)
                    break
                except Exception as e:  # noqa: BLE001 - torch's refusal is recorded as the reason
                    if not sparse and "sparse" in str(e).lower() and "dense" in str(e).lower():
                        sparse = True  # this class takes sparse gradients only: every variant runs so
                        try:
                            net, opt, dense = train(cls, kwargs, three=variant == "groups3", sparse=True)
                            break
                        except Exception as e2:  # noqa: BLE001
                            e = e2
                    errors.append({"kwargs": kwargs, "error": first_line(e)})
            else:
                skipped.append({"case": name, "class": f"torch.optim.{cls.__name__}", "tries": errors})
                continue
            state = {"model": net.state_dict(), "optimizer": opt.state_dict()}
            if dense is not None:
                state["optimizer_dense"] = dense.state_dict()
            path = os.path.join(out, name + ".pt")
            torch.save(state, path)
            case = {"case": name, "file": name + ".pt", "kind": "optimizer",
                    "class": f"torch.optim.{cls.__name__}", "variant": variant, "kwargs": kwargs,
                    "param_groups": len(opt.param_groups), "sparse_gradients": sparse,
                    "params": param_table(net, opt), "healthy": True}
            bad = non_finite_state(opt)
            if bad:  # torch itself wrote it so: recorded, and validate must say so
                case.update(healthy=False, expect_rule="non-finite",
                            why=f"torch {torch.__version__} left NaN or infinity in " + ", ".join(bad))
            cases.append(case)


def save_cases(out, cases, skipped):
    """One AdamW run written every way this torch.save can write it."""
    net, opt, _ = train(torch.optim.AdamW, {"lr": 1e-2})
    state = {"model": net.state_dict(), "optimizer": opt.state_dict()}
    params = param_table(net, opt)
    save_args = inspect.signature(torch.save).parameters

    def add(name, option, write, healthy=True, net_=None, opt_=None, expect_rule=None, cls="torch.optim.AdamW",
            kwargs=None, extra=None):
        path = os.path.join(out, name + ".pt")
        try:
            write(path)
        except Exception as e:  # noqa: BLE001
            skipped.append({"case": name, "save_option": option, "tries": [{"error": first_line(e)}]})
            if os.path.exists(path):
                os.remove(path)
            return
        cases.append({"case": name, "file": name + ".pt", "kind": "save", "class": cls,
                      "variant": "default", "kwargs": kwargs or {"lr": 1e-2}, "param_groups": 1,
                      "sparse_gradients": False, "params": params if net_ is None else param_table(net_, opt_),
                      "save_option": option, "healthy": healthy,
                      **({"expect_rule": expect_rule} if expect_rule else {}), **(extra or {})})

    import pickle
    for proto in range(2, pickle.HIGHEST_PROTOCOL + 1):
        add(f"save_zip_protocol{proto}", f"pickle_protocol={proto}",
            lambda p, proto=proto: torch.save(state, p, pickle_protocol=proto))
        add(f"save_legacy_protocol{proto}", f"_use_new_zipfile_serialization=False, pickle_protocol={proto}",
            lambda p, proto=proto: torch.save(state, p, pickle_protocol=proto, _use_new_zipfile_serialization=False))
    ser = torch.serialization
    if hasattr(ser, "set_crc32_options"):
        def no_crc(p):
            ser.set_crc32_options(False)
            try:
                torch.save(state, p)
            finally:
                ser.set_crc32_options(True)
        add("save_crc32_off", "torch.serialization.set_crc32_options(False)", no_crc)
    if hasattr(ser, "skip_data"):
        def skip(p):
            with ser.skip_data():
                torch.save(state, p)
        # torch.load reads it, but every tensor is zeros: not a checkpoint anyone can resume.
        add("save_skip_data", "torch.serialization.skip_data()", skip, healthy=False,
            expect_rule="tensor-data-skipped")
    if "_disable_byteorder_record" in save_args:
        add("save_no_byteorder", "_disable_byteorder_record=True",
            lambda p: torch.save(state, p, _disable_byteorder_record=True))

    def via_buffer(p):
        buf = io.BytesIO()
        torch.save(state, buf)
        with open(p, "wb") as f:
            f.write(buf.getvalue())
    add("save_bytesio", "torch.save to an io.BytesIO, bytes written to the file", via_buffer)

    # Model shapes: the parameters themselves laid out unusually.
    torch.manual_seed(0)
    tn = Net()
    tn.fc2.weight = nn.Parameter(tn.fc2.weight.detach().t().contiguous().t())  # [3, 6], strides (1, 3)
    top = torch.optim.AdamW(tn.parameters(), lr=1e-2)
    _step(tn, top)
    add("model_noncontiguous", "a parameter with strides (1, 3)",
        lambda p: torch.save({"model": tn.state_dict(), "optimizer": top.state_dict()}, p), net_=tn, opt_=top)
    torch.manual_seed(0)
    tied = TiedNet()
    tied_opt = torch.optim.AdamW(tied.parameters(), lr=1e-2)
    _step(tied, tied_opt)
    add("model_tied_weights", "one parameter under two names (tied weights: one storage)",
        lambda p: torch.save({"model": tied.state_dict(), "optimizer": tied_opt.state_dict()}, p),
        net_=tied, opt_=tied_opt)
    # torch.save(model): the torch.nn classes pickled themselves (a model of torch.nn classes only;
    # a class of the training script would be __main__'s, which torch.load must import and call).
    torch.manual_seed(0)
    seq = nn.Sequential(nn.Conv2d(2, 3, 3), nn.Flatten(), nn.Linear(27, 6), nn.ReLU(), nn.LayerNorm(6), nn.Linear(6, 3))
    seq_opt = torch.optim.AdamW(seq.parameters(), lr=1e-2)
    for x, _, y in batches(1):
        seq_opt.zero_grad()
        nn.functional.mse_loss(seq(x), y).backward()
        seq_opt.step()
    add("model_whole_module", "torch.save of the nn.Module itself beside the optimizer's state dict",
        lambda p: torch.save({"model": seq, "optimizer": seq_opt.state_dict()}, p), net_=seq, opt_=seq_opt,
        extra={"model_object": True})
    # SWA: AveragedModel's state_dict (module.* names, n_averaged) and SWALR beside the run's own.
    torch.manual_seed(0)
    sw = Net()
    sw_opt = torch.optim.SGD(sw.parameters(), lr=1e-2, momentum=0.9)
    averaged = torch.optim.swa_utils.AveragedModel(sw)
    swalr = torch.optim.swa_utils.SWALR(sw_opt, swa_lr=5e-3, anneal_epochs=2)
    for x, idx, y in batches(1):
        sw_opt.zero_grad()
        nn.functional.mse_loss(sw(x, idx), y).backward()
        sw_opt.step()
        averaged.update_parameters(sw)
        swalr.step()
    add("model_swa", "torch.optim.swa_utils: AveragedModel and SWALR state beside the model and SGD's",
        lambda p: torch.save({"model": sw.state_dict(), "swa_model": averaged.state_dict(),
                              "optimizer": sw_opt.state_dict(), "swa_scheduler": swalr.state_dict()}, p),
        net_=sw, opt_=sw_opt, cls="torch.optim.SGD", kwargs={"lr": 1e-2, "momentum": 0.9})
    # A GradScaler's state (torch 2.x has one for the CPU; 1.13's is CUDA's, disabled: {}).
    torch.manual_seed(0)
    gs = Net()
    gs_opt = torch.optim.AdamW(gs.parameters(), lr=1e-2)
    amp = getattr(torch, "amp", None)
    scaler = amp.GradScaler("cpu") if amp is not None and hasattr(amp, "GradScaler") else \
        torch.cuda.amp.GradScaler(enabled=False)
    for x, idx, y in batches(1):
        gs_opt.zero_grad()
        scaler.scale(nn.functional.mse_loss(gs(x, idx), y)).backward()
        scaler.step(gs_opt)
        scaler.update()
    add("model_grad_scaler", "a GradScaler's state_dict beside the model and optimizer",
        lambda p: torch.save({"model": gs.state_dict(), "optimizer": gs_opt.state_dict(),
                              "scaler": scaler.state_dict()}, p), net_=gs, opt_=gs_opt)
    long_name = "l" * 200
    uni = Net(names=("größe", "層", "fc1", long_name, "frozen"))
    uni_opt = torch.optim.AdamW(uni.parameters(), lr=1e-2)
    _step(uni, uni_opt)
    add("model_unicode_long_names", "non-ASCII and 200-character module names",
        lambda p: torch.save({"model": uni.state_dict(), "optimizer": uni_opt.state_dict()}, p),
        net_=uni, opt_=uni_opt)


def fault_cases(out, cases):
    """Seeded faults injected into copies of one healthy AdamW save, each with the rule meant to find it.

    Semantic faults are made on the state dict torch loaded and saved again by torch; the byte
    faults (truncation, a flipped bit) on the file's bytes."""
    net, opt, _ = train(torch.optim.AdamW, {"lr": 1e-2})
    params = param_table(net, opt)
    shapes = {i: tuple(p["shape"]) for i, p in enumerate(params)}
    g = torch.Generator().manual_seed(37)

    def fresh():
        return copy.deepcopy({"model": net.state_dict(), "optimizer": opt.state_dict()})

    def pick(state, n=1):
        keys = sorted(state["optimizer"]["state"])
        return [keys[i] for i in torch.randperm(len(keys), generator=g)[:n].tolist()]

    def nan(sd):
        k, = pick(sd)
        sd["optimizer"]["state"][k]["exp_avg"].view(-1)[0] = float("nan")
        return f"state[{k}].exp_avg[0] = NaN"

    def zeroed(sd):
        k, = pick(sd)
        for f in ("exp_avg", "exp_avg_sq"):
            sd["optimizer"]["state"][k][f].zero_()
        return f"state[{k}] moments zeroed at step 3"

    def permuted(sd):
        st = sd["optimizer"]["state"]
        keys = sorted(st)
        a = keys[0]
        b = next(k for k in keys if shapes[k] != shapes[a])
        st[a], st[b] = st[b], st[a]
        return f"state[{a}] and state[{b}] swapped (shapes {list(shapes[a])}, {list(shapes[b])})"

    def dropped(sd):
        k, = pick(sd)
        del sd["optimizer"]["state"][k]
        return f"state[{k}] removed"

    def lr_zero(sd):
        for group in sd["optimizer"]["param_groups"]:
            group["lr"] = 0.0
        return "every group's lr set to 0 after 3 steps (the lr=0 leak)"

    def step_drift(sd):
        k, = pick(sd)
        sd["optimizer"]["state"][k]["step"] += 2
        return f"state[{k}].step moved from 3 to 5"

    for name, edit, rule in [("nan", nan, "non-finite"), ("zeroed_entry", zeroed, "state-zero-after-steps"),
                             ("permuted_keys", permuted, "state-shape-mismatch"),
                             ("dropped_entry", dropped, "param-without-state"),
                             ("lr_zero", lr_zero, "lr-zero-with-steps"),
                             ("step_drift", step_drift, "steps-differ-in-group")]:
        sd = fresh()
        what = edit(sd)
        torch.save(sd, os.path.join(out, f"fault_{name}.pt"))
        cases.append(fault_case(f"fault_{name}", params, what, rule))

    base = os.path.join(out, "fault_base.tmp")
    torch.save(fresh(), base)
    with open(base, "rb") as f:
        data = bytearray(f.read())
    os.remove(base)
    with open(os.path.join(out, "fault_truncated.pt"), "wb") as f:
        f.write(data[: len(data) * 3 // 5])
    cases.append(fault_case("fault_truncated", params, f"the file cut to {len(data) * 3 // 5} of {len(data)} bytes",
                            None, torch_reads=False))
    import zipfile
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as z:
        info = max((i for i in z.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    name_len, extra_len = struct.unpack_from("<HH", data, info.header_offset + 26)
    at = info.header_offset + 30 + name_len + extra_len + int(torch.randint(info.file_size, (1,), generator=g))
    data[at] ^= 1 << int(torch.randint(8, (1,), generator=g))
    with open(os.path.join(out, "fault_bit_flip.pt"), "wb") as f:
        f.write(data)
    cases.append(fault_case("fault_bit_flip", params, f"one bit flipped at byte {at} (record {info.filename})",
                            "crc-mismatch"))


def fault_case(name, params, what, rule, torch_reads=True):
    case = {"case": name, "file": name + ".pt", "kind": "fault", "class": "torch.optim.AdamW", "variant": "default",
            "kwargs": {"lr": 1e-2}, "param_groups": 1, "sparse_gradients": False, "params": params,
            "fault": what, "healthy": False, "torch_reads": torch_reads}
    if rule:
        case["expect_rule"] = rule
    return case


class TiedNet(Net):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(3, 3)
        self.head.weight = self.frozen.weight  # same Parameter, two names in state_dict

    def forward(self, x, idx):
        return self.head(super().forward(x, idx))


def _step(net, opt):
    for x, idx, y in batches(1):
        opt.zero_grad()
        nn.functional.mse_loss(net(x, idx), y).backward()
        opt.step()


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)  # the same rounding on every machine of one instruction set
    cases, skipped = [], []
    optimizer_cases(out, cases, skipped)
    save_cases(out, cases, skipped)
    fault_cases(out, cases)
    scheduler_cases(out, cases, skipped)
    for c in cases:
        if not c.get("torch_reads", True):
            continue  # torch.load refuses it too: nothing to describe
        describe.write_expected(os.path.join(out, c["file"]), c.get("save_option") or f"{c['class']} {c['variant']}")
    doc = {"torch": torch.__version__.split("+")[0], "generator": "testdata/gen/gen_enumerated_corpus.py",
           "optimizer_classes": [f"torch.optim.{c.__name__}" for c in optimizer_classes()],
           "scheduler_classes": [f"torch.optim.lr_scheduler.{c.__name__}" for c in scheduler_classes()],
           "cases": cases, "skipped": skipped}
    write_json(os.path.join(out, "corpus.json"), doc, ensure_ascii=False)
    print(f"{len(cases)} cases, {len(skipped)} skipped, in {out}")


if __name__ == "__main__":
    main()
