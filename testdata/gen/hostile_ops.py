"""Building blocks of the hostile fixtures: payloads as opcodes, real torch.save output to splice
them into, and zip records with fixed dates. Used by gen_hostile.py and gen_hostile_torchload.py;
nothing here unpickles or runs anything.
"""
import io
import pickle
import struct
import zipfile

import torch


class Call:
    """Pickles as a call of fn(*args); never calls it."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


# If any reader ever executed these pickles, this file would appear; the tests
# check that it never does.
MARKER = "/tmp/optstate-hostile-pickle-ran"
RUN = f"touch {MARKER}"


def torch_save_bytes(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def state_with(extra):
    return {"state": {0: {"step": torch.tensor(1.0), "exp_avg": torch.zeros(2)}},
            "param_groups": [{"lr": 0.1, "params": [0]}], "extra": extra}


SLOT = "HOSTILE_SLOT"


def op_str(text):
    b = text.encode()
    return pickle.BINUNICODE + struct.pack("<I", len(b)) + b


def op_global(module, name):
    return pickle.GLOBAL + f"{module}\n{name}\n".encode()


def put(zf, name, data):
    """A stored entry with a fixed date, so that the files are the same on every run."""
    zf.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)


def splice(pushes_one_object, protocol=2):
    """A torch.save file of state_with(SLOT) whose SLOT opcode is replaced.
    Protocol 2: no FRAME opcodes, whose declared lengths the splice would break."""
    buf = io.BytesIO()
    torch.save(state_with(SLOT), buf, pickle_protocol=protocol)
    src = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith("data.pkl"):
                # BINUNICODE (protocol 2) or SHORT_BINUNICODE (4), as the pickler chose
                short = pickle.SHORT_BINUNICODE + bytes([len(SLOT)]) + SLOT.encode()
                slot = op_str(SLOT) if op_str(SLOT) in data else short
                assert data.count(slot) == 1
                data = data.replace(slot, pushes_one_object)
            put(dst, info.filename, data)
    return out.getvalue()


def zip_with_data_pkl(transform, protocol=2):
    """A real torch.save file whose data.pkl bytes are passed through transform."""
    buf = io.BytesIO()
    torch.save(state_with(0), buf, pickle_protocol=protocol)
    src = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            data = src.read(info)
            put(dst, info.filename, transform(data) if info.filename.endswith("data.pkl") else data)
    return out.getvalue()
