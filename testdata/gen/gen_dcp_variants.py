"""The 2-rank FSDP2 checkpoint's .metadata as other torch versions write it.

Usage (torch 2.6 chroot, see torch26-python.sh):
  python3 testdata/gen/gen_dcp_variants.py SOURCE_DCP OUTDIR
Each case is torch's own Metadata of SOURCE_DCP, changed the way another
version's writer would have made it, and pickled again; OUTDIR/<case>/ holds that
.metadata plus symlinks to the data files of testdata/good/torch26/fsdp2_dcp/
(OUTDIR must be directly below testdata/, like testdata/dcp_variants).
  version_field        Metadata.version = "1.0.0" (torch after 2.6)
  old_properties_path  TensorProperties pickled under its <= 2.2 module path,
                       torch.distributed._shard.sharded_tensor.metadata
  no_storage_meta      storage_meta = None (torch before 2.4)
  protocol_2           pickled with protocol 2 (any pickler may choose it)
optstate must read every one exactly as the original.
"""
import os
import pickle
import sys

from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint import metadata as dcp_metadata

OLD_MODULE = "torch.distributed._shard.sharded_tensor.metadata"


def write(md, case_dir, protocol=pickle.DEFAULT_PROTOCOL):
    with open(os.path.join(case_dir, ".metadata"), "wb") as f:
        pickle.dump(md, f, protocol=protocol)


def main():
    source, out = sys.argv[1], sys.argv[2]
    data_files = sorted(f for f in os.listdir(source) if f.endswith(".distcp"))
    cases = ["version_field", "old_properties_path", "no_storage_meta", "protocol_2"]
    for case in cases:
        md = FileSystemReader(source).read_metadata()
        case_dir = os.path.join(out, case)
        os.makedirs(case_dir, exist_ok=True)
        if case == "version_field":
            md.version = "1.0.0"
            write(md, case_dir)
        elif case == "old_properties_path":
            import importlib
            old_class = importlib.import_module(OLD_MODULE).TensorProperties  # still importable in 2.6
            for meta in md.state_dict_metadata.values():
                if isinstance(meta, dcp_metadata.TensorStorageMetadata):
                    p = meta.properties
                    meta.properties = old_class(dtype=p.dtype, layout=p.layout, requires_grad=p.requires_grad,
                                                memory_format=p.memory_format, pin_memory=p.pin_memory)
            write(md, case_dir)
        elif case == "no_storage_meta":
            md.storage_meta = None
            write(md, case_dir)
        else:
            write(md, case_dir, protocol=2)
        for data in data_files:
            link = os.path.join(case_dir, data)
            if os.path.lexists(link):
                os.remove(link)
            os.symlink(os.path.join("..", "..", "good", "torch26", "fsdp2_dcp", data), link)
    print(f"{len(cases)} DCP metadata variants in {out}")


if __name__ == "__main__":
    main()
