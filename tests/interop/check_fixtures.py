"""Real PyTorch must see every committed fixture exactly as its .expected.json says.

Run with any torch (1.13 via /usr/bin/python3, 2.6 via with_torch26.sh). For each
fixture under testdata/good/ it loads the file with torch.load and describes it
again (testdata/gen/describe.py):
  - fixtures written by the same torch line must match field for field (torch 2.x
    also records whether weights_only=True loading accepts the file);
  - fixtures written by the other line must give the same container, values and
    storages: torch 1.13 and 2.6 read each other's files identically.
Under torch 2.x the DCP fixture's .metadata is read with torch's own reader and
compared too. Prints one line per fixture and 'N passed, N failed'.
"""
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "testdata", "gen"))
import describe  # noqa: E402
import torch  # noqa: E402

TORCH2 = not torch.__version__.startswith("1.")
MINE = "torch26" if TORCH2 else "torch113"
CROSS_FIELDS = ("fixture", "covers", "file_size", "container", "root", "storages")


def first_difference(a, b, path="$"):
    """None when a and b are equal in value and type (JSON values, and also
    tensors by dtype, shape and bytes, tuples; torch.Size is not a tuple), else
    where they first differ."""
    def show(v):
        return json.dumps(v, default=repr)[:120]
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} {show(a)} != {type(b).__name__} {show(b)}"
    if isinstance(a, torch.Tensor):
        same = a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
        return None if same else f"{path}: tensors differ"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                return f"{path}.{k}: present on one side only"
            d = first_difference(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{path}: {len(a)} items != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    return None if a == b else f"{path}: {show(a)} != {show(b)}"


def fixtures():
    good = os.path.join(REPO, "testdata", "good")
    for line in sorted(os.listdir(good)):
        for name in sorted(os.listdir(os.path.join(good, line))):
            path = os.path.join(good, line, name)
            if name.endswith((".expected.json", ".manifest.json", ".truth.json")):
                continue
            if os.path.isfile(path):
                yield line, path


class Skip(Exception):
    pass


def check_file(line, path):
    with open(path + ".expected.json") as f:
        expected = json.load(f)
    text = json.dumps(expected)
    if not TORCH2 and '"type": "dtensor"' in text:
        raise Skip("DTensor values need torch >= 2.4")
    if not TORCH2 and ('"dtype": "float8' in text or '"dtype": "uint16"' in text):
        raise Skip("float8 and uint16 tensors need torch >= 2.2")
    actual = describe.describe(path, expected.get("covers", ""))
    if line == MINE:
        return first_difference(expected, actual)
    return first_difference({k: expected[k] for k in CROSS_FIELDS},
                            {k: actual[k] for k in CROSS_FIELDS})


def check_dcp(path):
    import gen_dcp_fsdp2
    with open(path + ".expected.json") as f:
        expected = json.load(f)
    actual = gen_dcp_fsdp2.dcp_description(path)
    return first_difference(expected, actual)


def run_checks(header, cases):
    """Runs (label, check) pairs: check() returns None when fine, a difference,
    or raises Skip. Prints a line each and 'N passed, N failed, N skipped';
    returns the exit code (1 when anything failed or nothing passed)."""
    passed = failed = skipped = 0
    print(f"torch {torch.__version__}: {header}")
    for label, check in cases:
        try:
            diff = check()
        except Skip as e:
            skipped += 1
            print(f"skip {label}: {e}")
            continue
        except Exception as e:  # noqa: BLE001 - a file torch cannot load is a failure
            diff = f"{type(e).__name__}: {e}"
        if diff:
            failed += 1
            print(f"FAIL {label}: {diff}")
        else:
            passed += 1
            print(f"ok   {label}")
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed or not passed else 0


def run_scratch(what, scratch, check):
    """run_checks over SCRATCH/<line>/<name>, calling check(line, name, path)."""
    cases = [(f"{line}/{name}", lambda line=line, name=name: check(line, name, os.path.join(scratch, line, name)))
             for line in sorted(os.listdir(scratch)) for name in sorted(os.listdir(os.path.join(scratch, line)))]
    return run_checks(f"checking {what} fixtures in {scratch}", cases)


def main():
    def case(line, path, check):
        kind = "same" if line == MINE else "cross"
        return f"{os.path.relpath(path, REPO)} ({kind})", lambda: check(line, path)
    cases = [case(line, p, check_file) for line, p in fixtures()]
    if TORCH2:
        for name in ("fsdp2_dcp", "fsdp2_3rank_dcp"):
            dcp = os.path.join(REPO, "testdata", "good", "torch26", name)
            cases.append(case("torch26", dcp, lambda _line, p: check_dcp(p)))
    return run_checks("checking fixtures against their .expected.json", cases)


if __name__ == "__main__":
    sys.exit(main())
