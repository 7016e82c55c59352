"""Plain pickles of protocols 0-5 made by Python's own pickler, for the pickle VM.

Usage: /usr/bin/python3 testdata/gen/gen_pickles.py OUTDIR
torch.save only ever writes protocol 2, but users pass pickle_protocol, old files
were written by Python 2 era code, and DCP's .metadata is protocol 4. Each
pN.pkl holds the same object, so together they exercise every opcode family:
text opcodes (0), binary ones (1), NEWOBJ and LONG1 (2), bytes (3), FRAME,
MEMOIZE, STACK_GLOBAL, sets and NEWOBJ_EX (4), BYTEARRAY8 (5). pN.pkl.expected.json
describes what pickle.loads returns (describe.py's value format).
"""
import collections
import json
import os
import pickle
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import describe  # noqa: E402


class Point:
    """Pickled through NEWOBJ_EX at protocol 4+ (keyword-only constructor)."""

    def __init__(self, *, x, y):
        self.x, self.y = x, y

    def __getnewargs_ex__(self):
        return (), {"x": self.x, "y": self.y}

    def __new__(cls, *args, **kwargs):
        return super().__new__(cls)


class Pair:
    """Pickled through NEWOBJ at protocol 2+ (positional constructor)."""

    def __init__(self, a, b):
        self.a, self.b = a, b

    def __getnewargs__(self):
        return self.a, self.b

    def __new__(cls, *args):
        return super().__new__(cls)


def sample(protocol):
    shared = [1, 2, 3]
    obj = {
        "none": None, "true": True, "false": False,
        "ints": [0, 1, 255, 256, 65535, 65536, -1, -129, 2**31 - 1, 2**31, -2**31 - 1,
                 2**63 - 1, -2**63, 2**64, -2**70, 10**30],
        "floats": [0.0, -0.5, 1e-300, 3.141592653589793, float("inf"), float("-inf")],
        "text": ["", "plain", "quote ' and \" and \\ backslash", "tab\tnewline\n", "é€😀"],
        "tuples": [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)],
        "shared": [shared, shared],
        "nested": {"a": {"b": {"c": [{"d": ()}]}}},
        "int_keys": {0: "zero", 7: "seven", (1, (16, 8)): "tuple key"},
        "ordered": collections.OrderedDict([("x", 1), ("y", 2)]),
    }
    if protocol >= 2:
        obj["pair"] = Pair(1, 2)
        obj["huge"] = [2**2100, -2**2100]  # LONG4: more than 255 bytes
    if protocol >= 3:
        obj["bytes"] = [b"", b"\x00\xff\x80", bytes(range(256))]
    if protocol >= 4:
        obj["sets"] = [set(), {1, 2, 3}, frozenset({4, 5})]
        obj["point"] = Point(x=1, y=2)
    if protocol >= 5:
        obj["bytearray"] = bytearray(b"abc")
    return obj


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for protocol in range(6):
        path = os.path.join(out, f"p{protocol}.pkl")
        with open(path, "wb") as f:
            pickle.dump(sample(protocol), f, protocol=protocol)
        with open(path, "rb") as f:
            loaded = pickle.load(f)
        d = describe.Describer()
        expected = {"fixture": os.path.basename(path),
                    "covers": f"Python pickle protocol {protocol}",
                    "root": d.value(loaded)}
        with open(path + ".expected.json", "w") as f:
            json.dump(expected, f, indent=1)
            f.write("\n")
        print(f"{path}: {os.path.getsize(path)} bytes")
    # EXT1/EXT2/EXT4: globals replaced by codes of copyreg's extension registry,
    # which only the writing process knows. The reader can only report the codes.
    import copyreg
    import math
    for code, fn in ((1, "sqrt"), (300, "floor"), (70000, "ceil")):
        copyreg.add_extension("math", fn, code)
    path = os.path.join(out, "ext.pkl")
    with open(path, "wb") as f:
        pickle.dump([math.sqrt, math.floor, math.ceil], f, protocol=2)
    print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
