"""What torch.load would resolve and which way it reads a file, observed without running anything.

Usage (torch 2.6 or 1.13): torch_load_recorder.py OUT_JSON FILE...
For each FILE, torch.load(FILE, weights_only=False, pickle_module=<recorder>) (and the pickle
module's own Unpickler and load replaced by the recorder's, since torch 1.13 ignores
pickle_module when weights_only=False; a canary proves the recorder is in the path before any
file is touched): every
Unpickler.find_class torch makes goes through the recorder, which records (module, name) and
returns the real object only for what torch's own weights_only allowlist holds (torch's
rebuild functions and storage types, so the load goes on past the first tensor); anything
else becomes an inert stub that accepts every call, attribute and state. Nothing a file names
is imported. Also recorded: the container torch took ("zip", "torchscript" - torch.jit.load is
replaced by a recorder that raises -, "tar", "legacy"), for a zip the record whose bytes torch
unpickled (matched by content), and the error that ended the load, if any (a stub's result
where torch wants a real object ends most hostile loads: by then every global before it has
been resolved, which is what is compared).
Writes {"torch": version, "allowlist": [its weights_only allowlist], "files": {FILE: {"container",
"records", "globals", "error"}}}.
"""
import _compat_pickle
import hashlib
import io
import json
import sys
import tarfile
import types
import zipfile

import torch
import torch.serialization

try:
    from torch._weights_only_unpickler import _get_allowed_globals
    ALLOWED = dict(_get_allowed_globals())
except ImportError:  # pragma: no cover - every torch since 1.13 has it
    ALLOWED = {}
try:  # torch 2.6 registers DTensor and its placements as safe when torch.distributed.tensor loads
    import torch.distributed.tensor  # noqa: F401
    for g in torch.serialization.get_safe_globals():
        ALLOWED[f"{g.__module__}.{g.__qualname__}"] = g
except (ImportError, AttributeError):
    pass


# Allowed by weights_only, but they allocate what the pickle names: stubbed all the same.
ALLOCATES = {"builtins.bytearray"}


class Stub:
    """Anything a hostile pickle asks for: callable, subscriptable, settable, never acting."""

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return Stub()

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return Stub()

    def __setstate__(self, state):
        pass

    def __getitem__(self, key):
        return Stub()

    def __setitem__(self, key, value):
        pass

    def __iter__(self):
        return iter(())

    def __len__(self):
        return 0

    def append(self, x):
        pass

    def extend(self, xs):
        pass


class Session:
    def __init__(self):
        self.globals = []
        self.pickles = []  # sha256 of every byte stream an Unpickler was given (zip records)
        self.container = None

    def find_class(self, module, name):
        # Python 2 names, mapped as the unpickler itself maps them (fix_imports) before importing.
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
        self.globals.append(f"{module}.{name}")
        key = f"{module}.{name}"
        if key in ALLOWED and key not in ALLOCATES:
            return ALLOWED[key]
        return type(name, (Stub,), {})


SESSION = Session()


class RecordingUnpickler(__import__("pickle")._Unpickler):
    """The pure-Python unpickler, so find_class is always ours (the C one may bypass a subclass's
    hooks for some opcodes in old Pythons)."""

    def __init__(self, file, *args, **kwargs):
        if isinstance(file, io.BytesIO):
            SESSION.pickles.append(hashlib.sha256(file.getvalue()).hexdigest())
        super().__init__(file, *args, **kwargs)

    def find_class(self, module, name):
        return SESSION.find_class(module, name)


recorder = types.ModuleType("optstate_recording_pickle")
recorder.Unpickler = RecordingUnpickler
recorder.load = lambda f, **kw: RecordingUnpickler(f, **kw).load()
recorder.__name__ = "optstate_recording_pickle"


def jit_load(*args, **kwargs):
    SESSION.container = "torchscript"
    raise RuntimeError("optstate recorder: torch.jit.load not run")


real_tar_open = tarfile.open


def tar_open(*args, **kwargs):
    t = real_tar_open(*args, **kwargs)
    SESSION.container = "tar"
    return t


def records_by_hash(path):
    try:
        with zipfile.ZipFile(path) as z:
            return {hashlib.sha256(z.read(i)).hexdigest(): i.filename for i in z.infolist() if not i.is_dir()}
    except Exception:  # noqa: BLE001 - not a zip Python reads
        return {}


def observe(path):
    global SESSION
    SESSION = Session()
    kwargs = {"pickle_module": recorder, "map_location": "cpu"}
    if "weights_only" in torch.load.__code__.co_varnames:
        kwargs["weights_only"] = False
    error = None
    try:
        torch.load(path, **kwargs)
    except BaseException as e:  # noqa: BLE001 - SystemExit from a stub's caller included
        error = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"[:300]
    container = SESSION.container
    if container is None:
        if isinstance(path, io.BytesIO):
            path.seek(0)
            container = "zip" if torch.serialization._is_zipfile(path) else "legacy"
        else:
            with open(path, "rb") as f:
                container = "zip" if torch.serialization._is_zipfile(f) else "legacy"
    names = records_by_hash(path) if container == "zip" and not isinstance(path, io.BytesIO) else {}
    return {"container": container, "records": [names.get(h, "?") for h in SESSION.pickles] if names else [],
            "globals": SESSION.globals, "error": error}


class Canary:
    """Pickles as a call of a function that would say it ran: the recorder must stub it."""

    def __reduce__(self):
        return canary_ran, ()


def canary_ran():
    raise SystemExit("torch_load_recorder: a global was really resolved and called; stopping before any "
                     "file is loaded (this torch does not take the recorder's pickle_module)")


def prove_recorder_in_path():
    """torch 1.13's torch.load replaces any pickle_module by `pickle` when weights_only=False: the
    recorder then also stands in for the pickle module's own Unpickler and load, and a canary
    saved here must come back as a stub, or nothing is loaded."""
    import pickle
    pickle.Unpickler = RecordingUnpickler
    pickle.load = recorder.load
    buf = io.BytesIO()
    torch.save({"canary": Canary()}, buf)
    buf.seek(0)
    seen = observe(buf)
    if "__main__.canary_ran" not in seen["globals"] or (seen["error"] or "").startswith("SystemExit"):
        raise SystemExit("torch_load_recorder: the canary was not stubbed; refusing to load anything")


def main():
    out, files = sys.argv[1], sys.argv[2:]
    torch.jit.load = jit_load
    tarfile.open = tar_open
    prove_recorder_in_path()
    result = {"torch": torch.__version__.split("+")[0], "allowlist": sorted(ALLOWED), "files": {}}
    for f in files:
        result["files"][f] = observe(f)
    with open(out, "w") as fh:
        json.dump(result, fh, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
