"""Seeded structured mutations of real torch.save zips, for the torch.load oracle.

Usage: mutate_for_torch_load.py OUTDIR COUNT SEED BASE...
Each mutation takes one BASE (a real torch.save zip, or a legacy-format file: see mutate_legacy) and a payload pickle (a call or a
named global from PAYLOADS, built as opcodes: nothing is pickled from a live object, nothing
is run; its global sometimes fetched back through the memo, the pickle sometimes in a shape no
pickler writes: a FRAME ending inside a string, two PROTOs, the payload left beneath the result,
or after the STOP), then applies one to three steps: the payload as data.pkl, as a case variant of data.pkl's name
beside it (before or after), as an exact duplicate record, deflated; the records reordered; junk
before or after the archive; data.pkl's local header naming another case of it than the central
directory does. A called payload sometimes passes its arguments in a list
(_rebuild_from_type_v2 spreads any iterable). One in five is a polyglot instead (see polyglot):
a tar before a zip, a legacy file before a zip, a legacy file that is also a tar. Writes OUTDIR/m<i>.pt and
OUTDIR/mutations.json ({file: [steps]}). check_torch_load.py then holds optstate's findings to
what torch resolves of each, in torch 2.6 and 1.13.
"""
import io
import json
import os
import random
import struct
import sys
import zipfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "testdata", "gen"))
from tar_format import tar_of, tar_then_legacy  # noqa: E402


def op_global(module, name):
    return b"c" + f"{module}\n{name}\n".encode()


def op_str(text):
    b = text.encode()
    return b"X" + struct.pack("<I", len(b)) + b


PAYLOADS = [
    ("posix", "system", "call"), ("builtins", "eval", "call"), ("subprocess", "Popen", "call"),
    ("this", "s", "name"), ("builtins", "bytearray", "alloc"), ("runpy", "run_path", "call"),
    ("mypackage.evil", "Thing", "call"), ("numpy", "ndarray", "name"), ("builtins", "dict", "call"),
]


def payload(rng):
    module, name, how = rng.choice(PAYLOADS)
    body = op_global(module, name)
    if rng.random() < 0.3:  # the global fetched back through the memo
        body += b"q\x00" + b"0" + b"h\x00"  # BINPUT 0, POP, BINGET 0
    if how == "call" and rng.random() < 0.25:
        # torch._tensor._rebuild_from_type_v2(func, Tensor, args, state) calls func(*args) on any
        # iterable: the call's arguments in a list
        body = (op_global("torch._tensor", "_rebuild_from_type_v2") + b"(" + body + op_global("torch", "Tensor") +
                b"]" + op_str("touch /tmp/optstate-never") + b"a}tR")
        how = "call, list arguments"
    elif how == "call":
        body += op_str("touch /tmp/optstate-never") + b"\x85R"  # TUPLE1 REDUCE
    elif how == "alloc":
        body += b"J" + struct.pack("<i", rng.choice([1 << 20, (1 << 31) - 1])) + b"\x85R"
    shaped, shape = pickle_shape(body, rng)
    return shaped, f"{module}.{name} ({how}){shape}"


def pickle_shape(body, rng):
    """The pickle around one object's opcodes, plain or in a shape no pickler writes."""
    shape = rng.choice(["plain", "plain", "frame_split", "proto_twice", "left_on_stack", "after_stop"])
    if shape == "frame_split":
        # A FRAME ending k bytes into a string: CPython's C unpickler reading a file (torch.load's
        # io.BytesIO of data.pkl) drops the rest of the frame and reads on after it; for k = 2 the
        # body, a bytes value to a whole-buffer reader, runs.
        text = b"benign-text"
        k = rng.choice([1, 2, 2, 2, 3, len(text) - 1])
        head = b"X" + struct.pack("<I", len(text))
        return (b"\x80\x04\x95" + struct.pack("<Q", len(head) + k) + head + text + b"C" + bytes([len(body)]) + body +
                b"00N."), " frame_split k=%d" % k
    if shape == "proto_twice":
        return b"\x80\x02\x80\x02" + body + b".", " proto_twice"
    if shape == "left_on_stack":
        return b"\x80\x02" + body + b"N.", " left_on_stack"
    if shape == "after_stop":
        return b"\x80\x02N." + b"\x80\x02" + body + b".", " after_stop"
    return b"\x80\x02" + body + b".", ""


def records(path):
    with zipfile.ZipFile(path) as z:
        return [(i.filename, z.read(i)) for i in z.infolist()]


def write_zip(items, deflate=()):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, data in items:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED if name in deflate else zipfile.ZIP_STORED
            z.writestr(info, data)
    return out.getvalue()


def case_variant(name, rng):
    head, _, last = name.rpartition("/")
    variants = [last.upper(), last.capitalize(), "".join(c.upper() if rng.random() < 0.5 else c for c in last)]
    v = rng.choice([x for x in variants if x != last] or [last.upper()])
    return f"{head}/{v}" if head else v


def legacy_pickles(data):
    """The five pickles of a legacy-format file as (start, end) offsets (pickletools reads the
    opcodes; nothing is unpickled), then the storage data."""
    import pickletools
    spans, at = [], 0
    for _ in range(5):
        stream = io.BytesIO(data[at:])
        for op, _, pos in pickletools.genops(stream):
            if op.name == "STOP":
                spans.append((at, at + pos + 1))
                at += pos + 1
                break
    return spans


def mutate_legacy(base, rng):
    """torch.load's legacy path unpickles each of five pickles before it checks it."""
    with open(base, "rb") as f:
        data = f.read()
    spans = legacy_pickles(data)
    pay, what = payload(rng)
    step = rng.choice(["legacy_first", "legacy_in_magic", "legacy_main", "legacy_keys", "legacy_after"])
    if step == "legacy_first":  # before the magic number: runs, then the magic check fails
        out = pay + data
    elif step == "legacy_in_magic":  # a call whose result is dropped, then the magic number
        start, end = spans[0]
        body = pay[2:-1] if pay.startswith(b"\x80\x02") and pay.endswith(b".") else b""
        out = data[:start + 2] + body + b"0" + data[start + 2:]
    elif step == "legacy_main":
        start, end = spans[3]
        out = data[:start] + pay + data[end:]
    elif step == "legacy_keys":  # the storage key list replaced: runs, then the storages fail
        start, end = spans[4]
        out = data[:start] + pay + data[end:]
    else:  # after the storages: torch.load never reads it
        out = data + pay
    steps = [f"payload {what}", step]
    if rng.random() < 0.3:
        out += bytes(rng.randrange(256) for _ in range(rng.choice([1, 100])))
        steps.append("junk_after")
    return out, steps


def polyglot(base, legacy_bases, rng):
    """One file that two readers take for two formats. torch.load decides by the first bytes: a
    zip's local-header magic at offset 0, else a tar if tarfile parses one (only the header
    checksum must hold; V7 or ustar), else the legacy pickle stream. A reader that looks for a
    zip's end record first sees the zip in all three."""
    pay, what = payload(rng)
    members = [("storages", pay), ("tensors", b"\x80\x02K\x00."), ("pickle", b"\x80\x02}q\x00.")]
    kind = rng.choice(["tar_then_zip", "legacy_then_zip", "tar_then_legacy"])
    with open(rng.choice(legacy_bases), "rb") as f:
        legacy = f.read()
    with open(base, "rb") as f:
        archive = f.read() if zipfile.is_zipfile(base) else write_zip([("archive/data.pkl", b"\x80\x02}q\x00.")])
    if kind == "tar_then_zip":  # the payload in the tar torch takes; the zip behind it benign
        out = tar_of(members, ustar=rng.random() < 0.5) + archive
    elif kind == "legacy_then_zip":  # the payload as the legacy file's main pickle
        spans = legacy_pickles(legacy)
        start, end = spans[3]
        out = legacy[:start] + pay + legacy[end:] + archive
    else:  # a benign legacy file whose first bytes are a tar that calls
        out = tar_then_legacy(members, legacy)
    return out, [f"payload {what}", kind]


def mutate(base, rng, legacy_bases=()):
    if legacy_bases and rng.random() < 0.2:
        return polyglot(base, legacy_bases, rng)
    if not zipfile.is_zipfile(base):
        return mutate_legacy(base, rng)
    items = records(base)
    pkl = next(n for n, _ in items if n.endswith("/data.pkl"))
    data, what = payload(rng)
    steps = [f"payload {what}"]
    deflate = set()
    prefix, suffix = b"", b""
    local_name = False
    for step in rng.sample(["replace", "variant_before", "variant_after", "duplicate", "reorder", "deflate",
                            "junk_before", "junk_after", "local_name"], rng.randint(1, 3)):
        if step == "replace":
            items = [(n, data if n == pkl else d) for n, d in items]
        elif step in ("variant_before", "variant_after"):
            v = (case_variant(pkl, rng), data)
            items = [v] + items if step == "variant_before" else items + [v]
        elif step == "duplicate":
            items = items + [(pkl, data)]
        elif step == "reorder":
            rng.shuffle(items)
        elif step == "deflate":
            deflate.add(pkl)
        elif step == "junk_before":
            prefix = bytes(rng.randrange(256) for _ in range(rng.choice([1, 7, 512])))
        elif step == "junk_after":
            suffix = bytes(rng.randrange(256) for _ in range(rng.choice([1, 100])))
        elif step == "local_name":
            local_name = True
        steps.append(step)
    if not any(s in ("replace", "variant_before", "variant_after", "duplicate") for s in steps):
        items = [(n, data if n == pkl else d) for n, d in items]
        steps.append("replace")
    archive = write_zip(items, deflate)
    if local_name:
        archive = rename_local_header(archive, pkl, case_variant(pkl, rng))
    return prefix + archive + suffix, steps


def rename_local_header(archive, name, other):
    """The local file header of `name` says `other` (same length); the central directory keeps `name`.
    Readers that walk local headers and readers that trust the central directory see different files."""
    old, new = name.encode(), other.encode()
    at = archive.find(b"PK\x03\x04")
    while at != -1:
        n, extra = struct.unpack_from("<HH", archive, at + 26)
        if archive[at + 30:at + 30 + n] == old:
            return archive[:at + 30] + new + archive[at + 30 + n:]
        size = struct.unpack_from("<I", archive, at + 18)[0]
        at = archive.find(b"PK\x03\x04", at + 30 + n + extra + size)
    return archive


def main():
    out, count, seed, bases = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    os.makedirs(out, exist_ok=True)
    rng = random.Random(seed)
    legacy_bases = [b for b in bases if not zipfile.is_zipfile(b)]
    index = {}
    for i in range(count):
        base = rng.choice(bases)
        data, steps = mutate(base, rng, legacy_bases)
        name = f"m{i:04d}.pt"
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        index[name] = {"base": os.path.basename(base), "steps": steps}
    with open(os.path.join(out, "mutations.json"), "w") as f:
        json.dump(index, f, indent=1)
    print(f"{count} mutations in {out} (seed {seed})")


if __name__ == "__main__":
    main()
