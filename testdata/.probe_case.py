import io, sys, zipfile, os, pickle, subprocess
sys.path.insert(0, "testdata/gen")
from gen_hostile import put, torch_save_bytes, state_with
from gen_hostile_torchload import system_call
src = zipfile.ZipFile(io.BytesIO(torch_save_bytes(state_with(0))))
for variant in ("DATA.PKL", "Data.pkl"):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            name = info.filename
            data = src.read(info)
            if name.endswith("/data.pkl"):
                name = name[:-len("data.pkl")] + variant
                data = system_call("probe")
            put(dst, name, data)
    open(f"testdata/.probe_{variant}.pt", "wb").write(out.getvalue())
