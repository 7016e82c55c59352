"""What optstate needs from a live training process, written while the
parameters exist: the parameter manifest (schemas/param-manifest.schema.json).

Call it next to ``torch.save`` of the optimizer::

    optstate.capture.write_manifest(model, optimizer, "params.json")

Each parameter the optimizer holds is listed in optimizer order (group by
group) with its name in the model, shape, dtype, ``data_ptr`` (the address
HeavyBall 0.12-0.24 keyed state by; 0 for an FSDP2 DTensor, as HeavyBall saw
it), byte size and group. ``collisions``, ``remap``, ``migrate`` and
``validate`` then place pointer-keyed state exactly. Under torch.distributed
each rank writes its own file when the path holds ``{rank}``
("params.rank{rank}.json"). Only torch is imported, and only what the objects
passed in already use.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Union

PathLike = Union[str, "os.PathLike[str]"]


def _names(model: Any) -> Dict[int, str]:
    names: Dict[int, str] = {}
    # remove_duplicate=False where torch has it (2.0+): a tied parameter keeps
    # its first name either way, as named_parameters lists it first.
    try:
        pairs = model.named_parameters(remove_duplicate=False)
    except TypeError:
        pairs = model.named_parameters()
    for name, p in pairs:
        names.setdefault(id(p), name)
    return names


def _dtype(p: Any) -> str:
    return str(p.dtype).replace("torch.", "", 1)


def manifest(model: Any, optimizer: Any) -> Dict[str, Any]:
    """The manifest document of `optimizer`'s parameters, named after `model`."""
    names = _names(model)
    params: List[Dict[str, Any]] = []
    for group_index, group in enumerate(optimizer.param_groups):
        for p in group["params"]:
            if id(p) not in names:
                raise ValueError(f"the optimizer holds a parameter of shape {list(p.shape)} that the model "
                                 "does not: pass the model the optimizer was built from")
            params.append({"name": names[id(p)], "shape": [int(d) for d in p.shape], "dtype": _dtype(p),
                           "data_ptr": int(p.data_ptr()), "nbytes": int(p.numel() * p.element_size()),
                           "group": group_index})
    return {"format": "optstate-param-manifest", "version": 1, "params": params}


def _rank() -> Optional[int]:
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    if dist.is_available() and dist.is_initialized():
        return int(dist.get_rank())
    return None


def write_manifest(model: Any, optimizer: Any, path: PathLike) -> str:
    """Writes the manifest (through a temporary file beside it, then a rename)
    and returns the path written: `path` with ``{rank}`` replaced by this
    process's rank under torch.distributed (0 outside it)."""
    text = os.fspath(path)
    if "{rank}" in text:
        text = text.replace("{rank}", str(_rank() or 0))
    doc = manifest(model, optimizer)
    tmp = f"{text}.tmp.{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, text)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return text
