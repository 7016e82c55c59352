"""What optstate needs from a live training process, written while the
parameters exist: the parameter manifest (schemas/param-manifest.schema.json).

Call it next to ``torch.save`` of the optimizer::

    optstate.capture.write_manifest(model, optimizer, "params.json")

Each parameter the optimizer holds is listed in optimizer order (group by
group) with its name in the model, shape, dtype, ``data_ptr`` (the address
HeavyBall 0.12-0.24 keyed state by; 0 for an FSDP2 DTensor, as HeavyBall saw
it), byte size and group. ``collisions``, ``remap``, ``migrate`` and
``validate`` then place pointer-keyed state exactly. Under torch.distributed
the document also names the process (``rank``, ``world_size``) and each rank
writes its own file when the path holds ``{rank}`` ("params.rank{rank}.json").
A parameter that is an FSDP2 / tensor-parallel DTensor keeps its global
``shape`` (what ``param.shape`` says, and what HeavyBall keyed by) and adds
this rank's piece: ``local_shape``, ``local_offset`` (where the piece starts in
the global tensor) and ``placements`` as torch prints them.

Under FSDP1 (FullyShardedDataParallel) names are the model's state_dict names
(FSDP's wrapper prefixes removed, as torch removes them). ``shape`` stays what
``param.shape`` says, which under FSDP1 is this rank's flattened piece, so it
is what an optimizer keyed by; ``global_shape`` is the whole parameter's shape
and ``flat_offset`` where the piece starts in the whole parameter flattened in
C order (absent when this rank holds none of it). With
``use_orig_params=False`` the optimizer holds each unit's flat parameter: its
``views`` list the parameters whose elements lie in this rank's piece, each
with its name, shape, ``flat_offset`` (where its elements in the piece start
in it, flattened), ``offset`` (where they start in the piece) and ``numel``.
Only torch is imported, and only what the objects passed in already use.
"""

from __future__ import annotations

import importlib
import json
import os
from typing import Any, Dict, List, Optional, Tuple, Union

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


def _clean(name: str) -> str:
    """`name` without FSDP1's wrapper prefixes, as torch's state_dict names it."""
    try:  # torch's own rule (private, so optional)
        common = importlib.import_module("torch.distributed.fsdp._common_utils")
        return str(common.clean_tensor_name(name))
    except (ImportError, AttributeError):
        for prefix in ("_fsdp_wrapped_module.", "_checkpoint_wrapped_module.", "_orig_mod."):
            name = name.replace(prefix, "")
        return name


def _fsdp1_pieces(model: Any) -> Dict[int, Dict[str, Any]]:
    """For every parameter FSDP1 manages in `model`: the manifest fields that
    say which piece of what whole this rank holds, keyed by id(parameter).
    Read from each FSDP1 unit's flat parameter (its _fqns, _shapes and
    _shard_param_infos: FSDP1's own record of the cut). {} without FSDP1."""
    pieces: Dict[int, Dict[str, Any]] = {}
    for unit_name, unit in model.named_modules():
        handle = getattr(unit, "_handle", None)
        flat = getattr(handle, "flat_param", None)
        if flat is None or not hasattr(flat, "_shard_param_infos"):
            continue
        prefix = _clean(unit_name + ".") if unit_name else ""
        views: List[Dict[str, Any]] = []
        originals = getattr(flat, "_params", None)  # use_orig_params=True: the parameters themselves
        for i, info in enumerate(flat._shard_param_infos):
            shape = [int(d) for d in flat._shapes[i]]
            fields: Dict[str, Any] = {"global_shape": shape}
            if info.in_shard:
                fields["flat_offset"] = int(info.intra_param_start_idx)
                views.append({"name": prefix + flat._fqns[i], "shape": shape,
                              "flat_offset": int(info.intra_param_start_idx), "offset": int(info.offset_in_shard),
                              "numel": int(info.numel_in_shard)})
            if originals is not None:
                pieces[id(originals[i])] = fields
        if originals is None:
            whole = getattr(flat, "_unpadded_unsharded_size", None)
            fields = {"views": views}
            if whole is not None:
                fields["global_shape"] = [int(d) for d in whole]
            rank = _process()
            fields["flat_offset"] = (rank[0] if rank else 0) * int(flat.numel())
            pieces[id(flat)] = fields
    return pieces


def _dtype(p: Any) -> str:
    return str(p.dtype).replace("torch.", "", 1)


def _piece(p: Any) -> Tuple[Any, Dict[str, Any]]:
    """The tensor whose bytes this rank holds for `p` (its local piece for a
    DTensor, else `p`) and the manifest fields describing that piece ({} for a
    plain tensor)."""
    if not (hasattr(p, "to_local") and hasattr(p, "placements") and hasattr(p, "device_mesh")):
        return p, {}
    local = p.to_local()
    piece: Dict[str, Any] = {"local_shape": [int(d) for d in local.shape],
                             "placements": [repr(placement) for placement in p.placements]}
    try:  # torch's own rule for where a rank's shard starts (private, so optional)
        utils = importlib.import_module("torch.distributed.tensor._utils")
        _, offset = utils.compute_local_shape_and_global_offset(p.shape, p.device_mesh, p.placements)
        piece["local_offset"] = [int(d) for d in offset]
    except (ImportError, AttributeError, TypeError):
        pass
    return local, piece


def manifest(model: Any, optimizer: Any) -> Dict[str, Any]:
    """The manifest document of `optimizer`'s parameters, named after `model`."""
    names = _names(model)
    fsdp1 = _fsdp1_pieces(model)
    if fsdp1:
        names = {key: _clean(name) for key, name in names.items()}
    params: List[Dict[str, Any]] = []
    for group_index, group in enumerate(optimizer.param_groups):
        for p in group["params"]:
            if id(p) not in names:
                raise ValueError(f"the optimizer holds a parameter of shape {list(p.shape)} that the model "
                                 "does not: pass the model the optimizer was built from")
            # A DTensor's bytes are its local piece's; data_ptr() is 0, as HeavyBall saw it.
            local, piece = _piece(p)
            params.append({"name": names[id(p)], "shape": [int(d) for d in p.shape], "dtype": _dtype(p),
                           "data_ptr": int(p.data_ptr()), "nbytes": int(local.numel() * local.element_size()),
                           "group": group_index, **piece, **fsdp1.get(id(p), {})})
    doc: Dict[str, Any] = {"format": "optstate-param-manifest", "version": 1}
    process = _process()
    if process is not None:
        doc["rank"], doc["world_size"] = process
    doc["params"] = params
    return doc


def _process() -> Optional[Tuple[int, int]]:
    """(rank, world size) under an initialised torch.distributed, else None."""
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    if dist.is_available() and dist.is_initialized():
        return int(dist.get_rank()), int(dist.get_world_size())
    return None


def write_manifest(model: Any, optimizer: Any, path: PathLike) -> str:
    """Writes the manifest (through a temporary file beside it, then a rename)
    and returns the path written: `path` with ``{rank}`` replaced by this
    process's rank under torch.distributed (0 outside it). Without ``{rank}``
    in `path` a job of several processes writes one file, rank 0's (the others
    write nothing and return the same path): what a replicated model (DDP)
    needs; a sharded one (FSDP, tensor parallel) wants ``{rank}``."""
    text = os.fspath(path)
    process = _process()
    if "{rank}" in text:
        text = text.replace("{rank}", str(process[0] if process else 0))
    elif process is not None and process[0] != 0:
        return text
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
