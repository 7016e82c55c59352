"""DCP checkpoints with hostile .metadata, for optstate to refuse.

Usage (torch 2.6 chroot, see torch26-python.sh):
  python3 testdata/gen/gen_hostile_dcp.py SOURCE_DCP OUTDIR
Each case is torch's own Metadata of SOURCE_DCP (a real FSDP2 checkpoint), edited
in Python and written back with pickle.dump as DCP writes it. OUTDIR/<case>/
holds that .metadata plus symlinks to the data files of
testdata/good/torch26/fsdp2_dcp/ (OUTDIR must be testdata/hostile/dcp or another
directory two levels below testdata/). Nothing here is ever executed: the
os_system case only names os.system.
"""
import dataclasses
import os
import pickle
import sys

import torch
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.metadata import MetadataIndex

TARGET = "model.emb.weight"  # 10 x 6, chunks of 5 rows at [0, 0] and [5, 0]


class BoundWriteText:
    """Pickles as getattr(PosixPath(MARK), 'write_text'): every name on the .metadata allowlist.
    Callable only so that pickle accepts it as a reduce function; never called here."""

    def __call__(self, *args):
        raise AssertionError("never called")

    def __reduce__(self):
        import pathlib
        return getattr, (pathlib.PosixPath("/tmp/optstate-hostile-dcp-ran"), "write_text")


class CallOf:
    """Pickles as fn(*args): REDUCE of whatever fn pickles as."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def chunk_key(md, index):
    return next(k for k in md.storage_data if k.fqn == TARGET and k.index == index)


def move_chunk(md, index, offsets=None, sizes=None):
    """Edits chunk `index` of TARGET, keeping its storage_data entry findable."""
    meta = md.state_dict_metadata[TARGET]
    old = meta.chunks[index]
    new = dataclasses.replace(old, offsets=torch.Size(offsets or old.offsets), sizes=torch.Size(sizes or old.sizes))
    meta.chunks[index] = new
    key = chunk_key(md, index)
    info = md.storage_data.pop(key)
    md.storage_data[MetadataIndex(TARGET, new.offsets, index)] = info


def relocate(md, **changes):
    key = chunk_key(md, 1)
    md.storage_data[key] = dataclasses.replace(md.storage_data[key], **changes)


CASES = {
    "path_traversal": lambda md: relocate(md, relative_path="../../../../etc/passwd"),
    "absolute_path": lambda md: relocate(md, relative_path="/etc/passwd"),
    "missing_file": lambda md: relocate(md, relative_path="__7_0.distcp"),
    "offset_past_end": lambda md: relocate(md, offset=10_000_000),
    "overlapping_chunks": lambda md: move_chunk(md, 1, offsets=[3, 0]),
    "gap_between_chunks": lambda md: move_chunk(md, 1, offsets=[6, 0], sizes=[4, 6]),
    "chunk_outside_tensor": lambda md: move_chunk(md, 1, sizes=[6, 6]),
    "os_system_global": lambda md: md.planner_data.__setitem__(TARGET, os.system),
    # Only allowlisted names (getattr, PosixPath), but the result of one call is called:
    # getattr(PosixPath(p), 'write_text')('...') writes a file when plain pickle.load reads it.
    # Put in an attribute of Metadata nobody reads, so no structural check trips over it.
    "getattr_called_result": lambda md: setattr(md, "notes", CallOf(BoundWriteText(), "pwned")),
}


def main():
    source, out = sys.argv[1], sys.argv[2]
    data_files = sorted(f for f in os.listdir(source) if f.endswith(".distcp"))
    for name, edit in CASES.items():
        md = FileSystemReader(source).read_metadata()
        edit(md)
        case = os.path.join(out, name)
        os.makedirs(case, exist_ok=True)
        with open(os.path.join(case, ".metadata"), "wb") as f:
            pickle.dump(md, f)
        for data in data_files:
            link = os.path.join(case, data)
            if os.path.lexists(link):
                os.remove(link)
            os.symlink(os.path.join("..", "..", "..", "good", "torch26", "fsdp2_dcp", data), link)
    print(f"{len(CASES)} hostile DCP checkpoints in {out}")


if __name__ == "__main__":
    main()
