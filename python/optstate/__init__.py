"""optstate: read, check and repair PyTorch optimizer checkpoints without running pickle code.

Each function runs the optstate command of the same name inside this process
(the native module ``optstate._native``, the C++ library itself, not a
subprocess) and returns the document that command prints with ``--json``: a
plain ``dict`` whose keys are those of the JSON Schemas in ``schemas/``. The
GIL is released while the work runs.

A job that cannot be done raises a subclass of :class:`Error` named after
its code (:class:`NotFoundError`, :class:`CorruptError`, ...), whose message
carries the context the library gives: file, record and byte offset. Findings
are not errors: ``validate`` returns its report; ``strict=True`` raises
:class:`CheckpointInvalid` when the report fails. A job that refuses to write
(``remap`` or ``migrate`` with state it cannot attribute) raises
:class:`Refused` and writes nothing.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Sequence, Union

from . import _native, capture
from optstate._errors import (CheckpointInvalid, CorruptError, Error, InternalError, InvalidArgumentError,
                              IoError, LimitExceededError, NotFoundError, Refused, TruncatedError,
                              UnsafeCheckpoint, UnsupportedError, error_from_document)
from optstate._safe_load import checked_torch_load, safe_load, safe_load_dir

__all__ = [
    "inspect", "validate", "collisions", "remap", "migrate", "verify", "consolidate", "safe_load",
    "safe_load_dir", "checked_torch_load", "Error", "TruncatedError", "CorruptError", "UnsupportedError", "LimitExceededError",
    "IoError", "InvalidArgumentError", "NotFoundError", "InternalError", "Refused", "CheckpointInvalid",
    "UnsafeCheckpoint", "run", "capture", "__version__",
]

__version__: str = _native.version

PathLike = Union[str, "os.PathLike[str]"]
Paths = Union[PathLike, Sequence[PathLike]]
Document = Dict[str, Any]

_EXIT_OK, _EXIT_FINDINGS, _EXIT_ERROR = 0, 1, 2


def run(args: Sequence[str]) -> "tuple[int, bytes, bytes]":
    """Runs ``optstate ARGS...`` in this process: (exit code, stdout, stderr)."""
    return _native.run([str(a) for a in args])


def _paths(paths: Paths) -> List[str]:
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    return [os.fspath(p) for p in paths]


def _params(model: Optional[Paths], manifest: Optional[PathLike], state_key: Optional[str]) -> List[str]:
    args: List[str] = []
    if manifest is not None:
        args += ["--manifest", os.fspath(manifest)]
    if model is not None:
        for m in _paths(model):
            args += ["--model", m]
    if state_key is not None:
        args += ["--state-key", state_key]
    return args


def _job(command: str, args: List[str], findings_ok: bool) -> "tuple[int, Document]":
    """Runs `command --json ARGS`; returns (exit code, document) or raises."""
    code, out, err = run([command, "--json", *args])
    text = out.decode("utf-8", errors="replace")
    try:
        doc = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError:
        doc = {}
    if isinstance(doc, dict) and "error" in doc and code != _EXIT_OK:
        raise error_from_document(doc["error"], refused=(code == _EXIT_FINDINGS))
    if code == _EXIT_OK or (code == _EXIT_FINDINGS and findings_ok):
        return code, doc
    message = err.decode("utf-8", errors="backslashreplace").strip() or f"optstate {command} exited {code}"
    raise InternalError(message)


def inspect(path: PathLike, *, depth: Optional[int] = None, object_path: Optional[str] = None,
            records: bool = False, verify_crc: bool = False) -> Document:
    """What is inside a checkpoint (schemas/inspect.schema.json), without loading tensors."""
    args = [os.fspath(path)]
    if depth is not None:
        args += ["--depth", str(depth)]
    if object_path is not None:
        args += ["--path", object_path]
    if records:
        args.append("--records")
    if verify_crc:
        args.append("--verify-crc")
    return _job("inspect", args, findings_ok=False)[1]


def validate(path: Paths, model: Optional[Paths] = None, manifest: Optional[PathLike] = None,
             rules: Optional[PathLike] = None, strict: bool = False, *, no_values: bool = False,
             state_key: Optional[str] = None) -> Document:
    """The CI check (schemas/validate.schema.json). ``strict``: raise CheckpointInvalid on errors."""
    args = _paths(path) + _params(model, manifest, state_key)
    if rules is not None:
        args += ["--rules", os.fspath(rules)]
    if no_values:
        args.append("--no-values")
    code, doc = _job("validate", args, findings_ok=True)
    if strict and code == _EXIT_FINDINGS:
        raise CheckpointInvalid(doc)
    return doc


def collisions(path: Paths, model: Optional[Paths] = None, manifest: Optional[PathLike] = None, *,
               state_key: Optional[str] = None) -> Document:
    """Which state entry belongs to which parameter (schemas/collisions.schema.json)."""
    return _job("collisions", _paths(path) + _params(model, manifest, state_key), findings_ok=True)[1]


def _write_flags(sync: bool) -> List[str]:
    return [] if sync else ["--no-sync"]


def remap(path: Paths, out: PathLike, model: Optional[Paths] = None, manifest: Optional[PathLike] = None, *,
          to: str = "index", on_collision: str = "fail", state_key: Optional[str] = None, zstd: bool = False,
          sync: bool = True) -> Document:
    """Rewrites state keys so torch.optim maps them to the right parameters (schemas/remap.schema.json)."""
    args = _paths(path) + ["-o", os.fspath(out), "--to", to, "--on-collision", on_collision]
    args += _params(model, manifest, state_key) + _write_flags(sync) + (["--zstd"] if zstd else [])
    return _job("remap", args, findings_ok=False)[1]


def migrate(path: Paths, out: PathLike, to: str = "heavyball3", model: Optional[Paths] = None,
            manifest: Optional[PathLike] = None, *, on_collision: str = "fail", steps: Optional[int] = None,
            precondition_frequency: Optional[int] = None, state_key: Optional[str] = None,
            sync: bool = True) -> Document:
    """Rewrites legacy HeavyBall state as HeavyBall 3.x or torch.optim saves it (schemas/migrate.schema.json)."""
    args = _paths(path) + ["-o", os.fspath(out), "--to", to, "--on-collision", on_collision]
    if steps is not None:
        args += ["--steps", str(steps)]
    if precondition_frequency is not None:
        args += ["--precondition-frequency", str(precondition_frequency)]
    args += _params(model, manifest, state_key) + _write_flags(sync)
    return _job("migrate", args, findings_ok=False)[1]


def verify(path: Paths, model: Optional[Paths] = None, manifest: Optional[PathLike] = None, *,
           optimizer: Optional[str] = None, state_key: Optional[str] = None) -> Document:
    """Replays a step of the state's algorithm against its parameters (schemas/verify.schema.json)."""
    args = _paths(path) + _params(model, manifest, state_key)
    if optimizer is not None:
        args += ["--optimizer", optimizer]
    return _job("verify", args, findings_ok=True)[1]


def consolidate(dir: PathLike, out: PathLike, *, to: str = "fqn", sync: bool = True) -> Document:
    """A DCP or DeepSpeed ZeRO directory into one torch.save file (schemas/consolidate.schema.json)."""
    args = [os.fspath(dir), "-o", os.fspath(out), "--to", to, "-q"] + _write_flags(sync)
    return _job("consolidate", args, findings_ok=False)[1]
