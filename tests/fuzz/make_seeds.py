"""Seed corpora for the fuzz targets, cut from testdata/.

Usage: python3 tests/fuzz/make_seeds.py OUTDIR
Writes OUTDIR/<target>/<name> for every target in tests/fuzz/ (any Python 3;
no torch needed). Files over 256 KiB are left out: fuzzers mutate small
inputs faster, and every format feature appears in a small fixture.
"""
import glob
import os
import shutil
import sys
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAX = 256 << 10


def small_files(patterns):
    seen = set()
    for pattern in patterns:
        for path in sorted(glob.glob(os.path.join(REPO, pattern), recursive=True)):
            real = os.path.realpath(path)
            if os.path.isfile(real) and os.path.getsize(real) <= MAX and real not in seen:
                seen.add(real)
                yield path


def name_of(path):
    return os.path.relpath(path, REPO).replace(os.sep, "__")


def main():
    out = sys.argv[1]
    shutil.rmtree(out, ignore_errors=True)
    targets = {t: os.path.join(out, t) for t in
               ("pickle_vm", "zip_directory", "legacy", "zstd", "dcp_metadata", "inspect", "roundtrip", "render",
                "inflate", "zero_dir")}
    for d in targets.values():
        os.makedirs(d)
    checkpoints = list(small_files(["testdata/good/*/*.pt", "testdata/hostile/*.pt", "testdata/validate/*.pt"]))
    for path in checkpoints:
        with open(path, "rb") as f:
            head = f.read(4)
        kind = "zip" if head == b"PK\x03\x04" else "legacy"
        for t in ("inspect", "roundtrip", "render", "zip_directory" if kind == "zip" else "legacy"):
            shutil.copy(path, os.path.join(targets[t], name_of(path)))
        if kind == "zip":
            with zipfile.ZipFile(path) as z:
                for info in z.infolist():
                    if not info.filename.endswith(".pkl"):
                        continue
                    try:
                        data = z.read(info)
                    except zipfile.BadZipFile:  # the hostile CRC-damaged file: its pickle is seeded via inspect
                        continue
                    with open(os.path.join(targets["pickle_vm"], name_of(path) + "__" +
                                           os.path.basename(info.filename)), "wb") as f:
                        f.write(data)
    for path in small_files(["testdata/pickles/*.pkl"]):
        shutil.copy(path, os.path.join(targets["pickle_vm"], name_of(path)))
    for path in small_files(["testdata/pickles/*.deflate-*"]):
        shutil.copy(path, os.path.join(targets["inflate"], name_of(path)))
    for path in small_files(["testdata/**/*.zst"]):
        shutil.copy(path, os.path.join(targets["zstd"], name_of(path)))
    for path in small_files(["testdata/**/.metadata"]):
        shutil.copy(path, os.path.join(targets["dcp_metadata"], name_of(path)))
        shutil.copy(path, os.path.join(targets["pickle_vm"], name_of(path)))
    # zero_dir: byte 0 picks the directory (high nibble: 0 stage 2, 1 stage 3, as
    # zero_dir_fuzz.cc orders them) and the file it replaces (low nibble: sorted order).
    for selector, stage in enumerate(("zero2", "zero3")):
        tag = os.path.join(REPO, "testdata/frameworks/deepspeed_0.16.4", stage, "global_step3")
        for index, name in enumerate(sorted(os.listdir(tag))):
            with open(os.path.join(tag, name), "rb") as f:
                data = f.read()
            with open(os.path.join(targets["zero_dir"], f"{stage}__{name}"), "wb") as f:
                f.write(bytes([selector << 4 | index]) + data)
    for t, d in targets.items():
        print(f"{t}: {len(os.listdir(d))} seeds")


if __name__ == "__main__":
    main()
