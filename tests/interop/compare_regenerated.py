"""Compare two fixture trees' .expected.json files (see check_regenerate.sh).
Ends with 'N passed, N failed'."""
import json
import os
import sys

POINTER_MIN = 1 << 16  # state keys above this are data_ptr values, not indices


def mask(doc):
    """Replaces pointer-valued dict keys by a marker; returns (doc, masked?)."""
    masked = False

    def walk(v, is_key=False):
        nonlocal masked
        if isinstance(v, dict):
            if is_key and v.get("type") == "int" and isinstance(v.get("value"), int) \
                    and v["value"] >= POINTER_MIN:
                masked = True
                return {"type": "int", "value": "<pointer>"}
            return {k: (walk(x, is_key=(k == "key")) if k != "items" or not isinstance(x, list)
                        else [walk(i, is_key=is_key and k == "items") for i in x])
                    for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    out = walk(doc)
    if masked:  # pointers change pickle sizes: container facts then differ legitimately
        for k in ("file_size", "container"):
            out.pop(k, None)
    if '"type": "dtensor"' in json.dumps(doc):
        # DeviceMesh pickles its Python _hash, which changes from run to run.
        out.pop("file_size", None)
        out.pop("container", None)
    if doc.get("container", {}).get("format") == "legacy":
        # The legacy format keys storages by str(storage._cdata), a memory address,
        # so the file's size depends on how many digits the addresses had.
        out.pop("file_size", None)
    return out


# Relative tolerance per tensor dtype: about two units in the last place.
RELATIVE = {"bfloat16": 1.6e-2, "float16": 2e-3}


def is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def near(a, b, rel):
    return abs(a - b) <= max(1e-6, rel * max(abs(a), abs(b)))


def close(a, b, path="", rel=1e-4):
    """Equal but for float rounding: floats within a relative `rel` (1e-4, or two
    ulps of a tensor's 16-bit dtype; absolute 1e-6 near zero) and CRCs not
    compared. Torch and oneDNN pick kernels by the CPU (AVX2, AVX-512, ...),
    whose sums and transcendentals round differently, so a fixture made on one
    machine comes back a few ulps off on another, and so does every CRC over its
    tensors. Structure, keys, types, shapes, strides, sizes and sharing must still
    match exactly. Returns the first difference, or None."""
    differs = f"{path}: {a!r} != {b!r}"
    if is_number(a) and is_number(b) and float in (type(a), type(b)):
        return None if near(a, b, rel) else differs
    if type(a) != type(b):
        return None if a == b else differs
    if isinstance(a, dict):
        if a.keys() != b.keys():
            return f"{path}: keys {sorted(a.keys() ^ b.keys())} in one only"
        if isinstance(a.get("dtype"), str):
            rel = RELATIVE.get(a["dtype"], rel)
        pairs = [(f"{path}/{k}", a[k], b[k]) for k in a if k != "crc32"]
    elif isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items != {len(b)}"
        pairs = [(f"{path}[{i}]", x, y) for i, (x, y) in enumerate(zip(a, b))]
    else:
        return None if a == b else differs
    for where, x, y in pairs:
        d = close(x, y, where, rel)
        if d:
            return d
    return None


def main():
    committed, fresh = sys.argv[1], sys.argv[2]
    passed = failed = rounded = 0
    for line in sorted(os.listdir(committed)):
        for name in sorted(os.listdir(os.path.join(committed, line))):
            if not name.endswith(".json"):
                continue
            a_path = os.path.join(committed, line, name)
            b_path = os.path.join(fresh, line, name)
            if not os.path.exists(b_path):
                failed += 1
                print(f"FAIL {line}/{name}: not regenerated")
                continue
            a, b = json.load(open(a_path)), json.load(open(b_path))
            if name.endswith(".manifest.json"):
                for p in a["params"] + b["params"]:
                    p.pop("data_ptr", None)
            elif name.startswith("fsdp2_") and name.endswith("dcp.expected.json"):
                pass
            else:
                a, b = mask(a), mask(b)
            if a == b:
                passed += 1
                continue
            difference = close(a, b)
            if difference is None:
                passed += 1
                rounded += 1
            else:
                failed += 1
                print(f"FAIL {line}/{name}: regenerated description differs: {difference}")
    regenerated = {os.path.join(l, n) for l in os.listdir(fresh) for n in os.listdir(os.path.join(fresh, l))}
    kept = {os.path.join(l, n) for l in os.listdir(committed) for n in os.listdir(os.path.join(committed, l))}
    for extra in sorted(regenerated - kept):
        failed += 1
        print(f"FAIL {extra}: generated but not committed")
    if rounded:
        print(f"{rounded} of the passed equal only up to float rounding (this CPU's kernels differ from "
              "those of the machine that made the fixtures); CRCs not compared for those")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
