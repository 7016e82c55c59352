"""Real torch reads optstate's rewritten checkpoints exactly as it read the originals.

Usage: python3 tests/interop/check_repacked.py SCRATCH
SCRATCH/<line>/<file>.pt is `optstate repack` of testdata/good/<line>/<file>
(check_repack.sh makes them). Each must load, describe to the same values,
structure and storage sharing as the original's .expected.json, and under torch
2.x load with weights_only=True. Ends with 'N passed, N failed, N skipped'.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_fixtures as cf  # noqa: E402  (also puts testdata/gen on the path)
import describe  # noqa: E402


def check(line, name, out):
    original = os.path.join(cf.REPO, "testdata", "good", line, name[:-len(".pt")])
    with open(original + ".expected.json") as f:
        want = json.load(f)
    text = json.dumps(want)
    if not cf.TORCH2 and ('"type": "dtensor"' in text or '"dtype": "float8' in text or '"dtype": "uint16"' in text):
        raise cf.Skip("needs torch 2.x")
    got = describe.describe(out)
    diff = cf.first_difference({"root": want["root"], "storages": want["storages"]},
                               {"root": got["root"], "storages": got["storages"]})
    if not diff and cf.TORCH2 and not got["weights_only_load"]["ok"]:
        diff = "weights_only=True refused it: " + got["weights_only_load"]["error"]
    return diff


def main():
    return cf.run_scratch("repacked", sys.argv[1], check)


if __name__ == "__main__":
    sys.exit(main())
