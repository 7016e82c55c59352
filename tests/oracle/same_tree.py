"""Two loaded objects compared as trees: what torch.load gave from one file against another.

Tensors by shape, dtype, strides and their bits (NaN equal to itself), dicts entry by entry in
order with keys compared as values (a pickled optimizer keys its state by Parameter), lists and
tuples item by item, bound methods by function and object, other objects by class and __dict__;
an object met again is not compared again (cycles). Used by tests/oracle/resume_oracle.py and
tests/interop/check_heavyball_migrate.py.
"""
import torch


def same(a, b, seen=None):
    """"" when a and b are the same tree (tensors by their bits, objects by class and __dict__), else where not."""
    seen = set() if seen is None else seen
    if id(a) in seen:
        return ""
    seen.add(id(a))
    if type(a) is not type(b):
        return f"{type(a).__name__} became {type(b).__name__}"
    if isinstance(a, torch.Tensor):
        ok = a.shape == b.shape and a.dtype == b.dtype and a.stride() == b.stride() and torch.equal(bits(a), bits(b))
        return "" if ok else "a tensor differs"
    if isinstance(a, dict):  # keys compared as values too: a pickled optimizer keys its state by Parameter
        if len(a) != len(b):
            return "entry counts differ"
        for (ka, va), (kb, vb) in zip(a.items(), b.items()):
            d = same(ka, kb, seen) or same(va, vb, seen)
            if d:
                return f"[{ka if isinstance(ka, (str, int)) else type(ka).__name__}] {d}"
        return ""
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return "lengths differ"
        for i, (x, y) in enumerate(zip(a, b)):
            d = same(x, y, seen)
            if d:
                return f"[{i}] {d}"
        return ""
    if isinstance(a, float) and a != a:
        return "" if b != b else "NaN became a number"
    if isinstance(a, (int, float, str, bytes, bool, type(None))):
        return "" if a == b else f"{a!r} became {b!r}"
    if hasattr(a, "__self__") and hasattr(a, "__func__"):  # a bound method
        return same(a.__self__, b.__self__, seen) if a.__func__ is b.__func__ else "another method"
    if hasattr(a, "__dict__"):
        return same(vars(a), vars(b), seen)
    return "" if a == b else f"{type(a).__name__} differs"


def bits(t):
    t = t.contiguous().reshape(-1)
    return t.view(torch.uint8) if t.dtype != torch.bool else t
