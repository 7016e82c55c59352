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


def main():
    committed, fresh = sys.argv[1], sys.argv[2]
    passed = failed = 0
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
            else:
                failed += 1
                print(f"FAIL {line}/{name}: regenerated description differs")
    regenerated = {os.path.join(l, n) for l in os.listdir(fresh) for n in os.listdir(os.path.join(fresh, l))}
    kept = {os.path.join(l, n) for l in os.listdir(committed) for n in os.listdir(os.path.join(committed, l))}
    for extra in sorted(regenerated - kept):
        failed += 1
        print(f"FAIL {extra}: generated but not committed")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
