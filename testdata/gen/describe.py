"""Canonical description of a checkpoint as PyTorch sees it after torch.load.

C++ tests compare their own reading of a fixture with this description, so the
C++ side never needs Python. The format is schemas/fixture-expected.schema.json:

  value   {"type": "none"} | {"type": "bool", "value": b} | {"type": "int", "value": n}
          | {"type": "float", "value": x}  (x a number, or "nan"/"inf"/"-inf")
          | {"type": "str", "value": s} | {"type": "bytes", "len": n, "crc32": c}
          | {"type": "tuple"|"list"|"torch.Size"|"set"|"frozenset", "items": [value...]}
          | {"type": "dict", "class": "dict"|"collections.OrderedDict",
             "items": [{"key": value, "value": value}...]}     (insertion order)
          | {"type": "tensor", "class": "torch.Tensor"|"torch.nn.parameter.Parameter",
             "dtype", "shape", "stride", "storage_offset", "requires_grad",
             "storage": index into "storages", "crc32": of the logical values in C order,
             "head": first up to 4 values as floats}
          | {"type": "dtensor", "shape": global shape, "placements": ["Shard(dim=0)"...],
             "mesh_shape": [...], "local": tensor}     (FSDP2 / DTensor values)
          | {"type": "sharded_tensor", "shape": global shape, "world_size": n, "rank": r,
             "local_shards": [{"offsets": [...], "local": tensor}...]}   (FSDP1's ShardedTensor)
          | {"type": "object", "class": "module.QualName"}
  ints outside the int64 range are written as decimal strings.

Storages are numbered in first-seen order of a depth-first walk in dict insertion
order, which is the order pickle first meets them; tensors that share memory name
the same storage. "crc32" values are zlib.crc32 (the zip CRC).

Usage: python3 describe.py CHECKPOINT [--covers TEXT] > CHECKPOINT.expected.json
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import zipfile
import zlib

import torch

INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1
_INT_VIEW = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def tensor_bytes(t):
    """Raw little-endian bytes of t's logical values in C order."""
    t = t.detach().contiguous()
    if t.is_complex():
        t = torch.view_as_real(t).contiguous()
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    elif t.dtype.is_floating_point or t.dtype not in _INT_VIEW.values():
        t = t.view(_INT_VIEW[t.element_size()])
    return t.numpy().tobytes()


def untyped_storage(t):
    if hasattr(t, "untyped_storage"):  # torch >= 2.0
        return t.untyped_storage()
    return t.storage()  # torch 1.13: a TypedStorage; data_ptr/nbytes are what we need


def float_value(x):
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


class Describer:
    def __init__(self):
        self.storages = []  # dicts, in first-seen order
        self._by_ptr = {}

    def storage_index(self, t):
        s = untyped_storage(t)
        ptr, nbytes = s.data_ptr(), s.nbytes()
        key = (ptr, nbytes) if ptr != 0 else ("empty", len(self.storages))
        if key in self._by_ptr:
            return self._by_ptr[key]
        itemsize = t.element_size()
        whole = torch.empty(0, dtype=t.dtype)
        if nbytes:
            whole.set_(t.storage() if not hasattr(t, "untyped_storage") else s, 0,
                       (nbytes // itemsize,), (1,))
        self.storages.append({
            "dtype": str(t.dtype).replace("torch.", ""),
            "nbytes": nbytes,
            "crc32": zlib.crc32(tensor_bytes(whole)) if nbytes else 0,
        })
        self._by_ptr[key] = len(self.storages) - 1
        return self._by_ptr[key]

    def value(self, v):
        if v is None:
            return {"type": "none"}
        if isinstance(v, bool):
            return {"type": "bool", "value": v}
        if isinstance(v, int):
            return {"type": "int", "value": v if INT64_MIN <= v <= INT64_MAX else str(v)}
        if isinstance(v, float):
            return {"type": "float", "value": float_value(v)}
        if isinstance(v, str):
            return {"type": "str", "value": v}
        if isinstance(v, (bytes, bytearray)):
            return {"type": "bytes", "len": len(v), "crc32": zlib.crc32(bytes(v))}
        if isinstance(v, torch.Tensor) and type(v).__name__ == "ShardedTensor":  # FSDP1's sharded state
            # The process group it was made in: loaded in one, its world size and rank are this load's
            # own, which is what __setstate__ checks against the saved ones.
            import torch.distributed as dist
            return {"type": "sharded_tensor", "shape": list(v.size()),
                    "world_size": dist.get_world_size() if dist.is_initialized() else 1,
                    "rank": dist.get_rank() if dist.is_initialized() else 0,
                    "local_shards": [{"offsets": list(s.metadata.shard_offsets), "local": self.tensor(s.tensor)}
                                     for s in v.local_shards()]}
        if isinstance(v, torch.Tensor) and hasattr(v, "_local_tensor") and hasattr(v, "placements"):
            return {"type": "dtensor", "shape": list(v.shape),
                    "placements": [repr(p) for p in v.placements],
                    "mesh_shape": list(v.device_mesh.mesh.shape),
                    "local": self.tensor(v._local_tensor)}
        if isinstance(v, torch.Tensor):
            return self.tensor(v)
        if isinstance(v, torch.Size):
            return {"type": "torch.Size", "items": [self.value(x) for x in v]}
        if isinstance(v, tuple) and type(v) is tuple:
            return {"type": "tuple", "items": [self.value(x) for x in v]}
        if isinstance(v, list) and type(v) is list:
            return {"type": "list", "items": [self.value(x) for x in v]}
        if type(v) in (set, frozenset):  # iteration order, which pickle also writes in
            return {"type": type(v).__name__, "items": [self.value(x) for x in v]}
        if isinstance(v, dict):
            cls = "dict" if type(v) is dict else f"{type(v).__module__}.{type(v).__qualname__}"
            return {"type": "dict", "class": cls,
                    "items": [{"key": self.value(k), "value": self.value(x)} for k, x in v.items()]}
        return {"type": "object", "class": f"{type(v).__module__}.{type(v).__qualname__}"}

    def tensor(self, t):
        cls = "torch.nn.parameter.Parameter" if isinstance(t, torch.nn.Parameter) else "torch.Tensor"
        if t.is_meta:
            return {"type": "tensor", "class": cls, "dtype": str(t.dtype).replace("torch.", ""),
                    "shape": list(t.shape), "stride": list(t.stride()),
                    "storage_offset": t.storage_offset(), "requires_grad": bool(t.requires_grad),
                    "storage": None, "crc32": 0, "head": []}
        flat = t.detach().reshape(-1)[:4]
        if flat.is_complex():
            flat = torch.view_as_real(flat).reshape(-1)[:4]
        return {
            "type": "tensor",
            "class": cls,
            "dtype": str(t.dtype).replace("torch.", ""),
            "shape": list(t.shape),
            "stride": list(t.stride()),
            "storage_offset": t.storage_offset(),
            "requires_grad": bool(t.requires_grad),
            "storage": self.storage_index(t),
            "crc32": zlib.crc32(tensor_bytes(t)),
            "head": [float_value(float(x)) for x in flat.to(torch.float64).tolist()],
        }


def zip_container(path, data):
    records = []
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            # Data starts after the local header (30 bytes + name + extra field).
            name_len, extra_len = struct.unpack_from("<HH", data, info.header_offset + 26)
            records.append({
                "name": info.filename,
                "size": info.file_size,
                "crc32": info.CRC,
                "data_offset": info.header_offset + 30 + name_len + extra_len,
            })
    names = [r["name"] for r in records]
    pkl = next(r for r in records if r["name"].endswith("/data.pkl"))
    proto = data[pkl["data_offset"] + 1] if data[pkl["data_offset"]] == 0x80 else 0
    return {"format": "zip", "prefix": names[0].split("/")[0], "records": records,
            "pickle_protocol": proto}


def container(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] == b"PK\x03\x04":
        return zip_container(path, data)
    if data[:4] == b"\x28\xb5\x2f\xfd":
        return {"format": "zstd"}
    if data[:2] == b"\x80\x02":
        return {"format": "legacy", "pickle_protocol": 2}
    return {"format": "unknown"}


def load(path):
    """torch.load of path (decompressing .zst first), trusting our own fixtures."""
    kwargs = {"map_location": "cpu"}
    if "weights_only" in torch.load.__code__.co_varnames:
        kwargs["weights_only"] = False
    if container(path)["format"] != "zstd":
        return torch.load(path, **kwargs)
    with tempfile.TemporaryDirectory() as tmp:
        plain = os.path.join(tmp, "plain.pt")
        subprocess.run(["zstd", "-q", "-d", "-f", path, "-o", plain], check=True)
        return torch.load(plain, **kwargs)


def weights_only_result(path):
    """Whether torch.load(weights_only=True) takes the file (meaningful on torch 2.x only)."""
    if container(path)["format"] == "zstd":
        return None
    try:
        torch.load(path, map_location="cpu", weights_only=True)
        return {"ok": True}
    except Exception as e:  # noqa: BLE001 - any refusal is the answer
        return {"ok": False, "error": str(e).strip().splitlines()[0][:300]}


def describe(path, covers=""):
    d = Describer()
    root = d.value(load(path))
    out = {
        "fixture": os.path.basename(path),
        "covers": covers,
        "torch": torch.__version__.split("+")[0],
        "file_size": os.path.getsize(path),
        "container": container(path),
        "root": root,
        "storages": d.storages,
    }
    if not torch.__version__.startswith("1."):
        out["weights_only_load"] = weights_only_result(path)
    return out


def write_expected(path, covers):
    with open(path + ".expected.json", "w") as f:
        json.dump(describe(path, covers), f, indent=1)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--covers", default="")
    args = ap.parse_args()
    json.dump(describe(args.checkpoint, args.covers), sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
