"""The security gate against torch.load itself: what torch resolves, optstate reports.

Usage: check_torch_load.py --optstate BIN --torch26 WRAPPER [--torch113 PYTHON] [--known FILE]
                           [--skip-unreadable-by-torch] PATH...
PATH: files, or directories searched for *.pt, *.pth, *.bin, *.pkl, *.ckpt files (recursively).
torch_load_recorder.py runs in each torch (2.6 through WRAPPER, e.g. testdata/gen/torch26-python.sh;
1.13 on the host) over every file: the globals torch's find_class resolves (nothing imported or
run), the container it took, the zip record it unpickled. Then `optstate validate FILE --json`,
and per file and torch:
  globals    every global torch resolved that torch 2.6's weights_only allowlist does not hold is
             named by a finding of optstate's report ("global"), at warning or error;
  container  the container optstate read is the one torch took: a zip torch.load opened as a
             zip, a legacy pickle stream as legacy, a pre-0.4 tar as a tar (read or scanned as
             one; a refusal, exit 2, is judged by the globals alone); a file torch hands to torch.jit.load (TorchScript) is reported as such
             (torchscript-archive), since optstate does not read TorchScript code.
With --mutations N, also N seeded structured mutations of the real torch.save zips under
testdata/good (payload records, case variants, duplicates, deflate, reordering, junk around the
archive, tar/legacy/zip polyglots; mutate_for_torch_load.py), each disagreement printed with its steps and seed.
A disagreement fails unless FILE (JSON {"<torch> <path>": reason}) lists it. Prints
"torch.load oracle (<torch>): N/M files agree". Exit 1 on a disagreement, 2 on a broken run.
"""
import _compat_pickle
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUFFIXES = (".pt", ".pth", ".bin", ".pkl", ".ckpt", ".pickle", ".data")


def files_of(paths):
    out = []
    for p in paths:
        if os.path.isdir(p):
            for root, _, names in os.walk(p):
                out += [os.path.join(root, n) for n in sorted(names) if n.endswith(SUFFIXES)]
        else:
            out.append(p)
    return sorted(set(out))


def record(python, chroot, root, files, tmp):
    """Runs the recorder in chunks (a hostile file may take its process down). Paths are given
    relative to `root`, the directory the chroot mounts (-C) and the host runs in: the repository,
    or its parent when files lie beside it (../shared/peer-corpus)."""
    result = {"files": {}}
    script = os.path.relpath(os.path.join(REPO, "tests/oracle/torch_load_recorder.py"), root)
    for i in range(0, len(files), 200):
        chunk = [os.path.relpath(f, root) for f in files[i:i + 200]]
        out = os.path.join(tmp, f"rec{i}.json")
        rel = os.path.relpath(out, root)
        p = subprocess.run(python + (["-C", root] if chroot else []) + ["-W", "ignore", script, rel] + chunk,
                           capture_output=True, text=True, cwd=root, timeout=1800)
        if p.returncode == 77:  # with_torch26.sh: no torch 2.6 here (it said so)
            sys.stderr.write(p.stderr)
            sys.exit(77)
        if p.returncode != 0 or not os.path.exists(out):
            sys.exit(f"check_torch_load: the recorder failed: {p.stderr.strip()[-600:]}")
        with open(out) as f:
            doc = json.load(f)
        result["torch"] = doc["torch"]
        result["allowlist"] = doc["allowlist"]
        result["files"].update({os.path.join(root, k): v for k, v in doc["files"].items()})
    return result


def validate(optstate, path):
    p = subprocess.run([optstate, "validate", path, "--json"], capture_output=True, text=True, timeout=120)
    try:
        doc = json.loads(p.stdout) if p.stdout.strip() else None
    except json.JSONDecodeError:
        doc = None
    return p.returncode, doc, p.stderr


def py3_name(g):
    """optstate names a global as the pickle spells it (__builtin__.object); torch's unpickler maps
    Python 2 names before resolving them, and the recorder records the mapped name."""
    for split in range(len(g.split(".")) - 1, 0, -1):  # the module part may itself hold dots
        parts = g.split(".")
        m, n = ".".join(parts[:split]), ".".join(parts[split:])
        if (m, n) in _compat_pickle.NAME_MAPPING:
            m, n = _compat_pickle.NAME_MAPPING[(m, n)]
            return f"{m}.{n}"
        if m in _compat_pickle.IMPORT_MAPPING:
            return f"{_compat_pickle.IMPORT_MAPPING[m]}.{n}"
    return g


# What optstate's report says of a container torch took: its "format", or for a file it could
# not read, the words of what it scanned instead (read_error.scanned).
CONTAINER_WORDS = {"zip": ("zip", "zip"), "legacy": ("legacy", "legacy"), "tar": (None, "tar checkpoint")}


def container_read(seen, report):
    """'' when optstate read the file as the container torch took, else what it read."""
    want = CONTAINER_WORDS.get(seen["container"])
    if want is None or report.get("format") in ("zstd", "dcp", "safetensors", "deepspeed-zero"):
        return ""
    fmt, words = want
    if report.get("format") == fmt and fmt is not None:
        return ""
    scanned = report.get("read_error", {}).get("scanned", "")
    if report.get("format") == "unreadable" and words in scanned:
        return ""
    return f"torch took it as {seen['container']}; optstate read {report.get('format')} ({scanned[:80]})"


def judge(seen, allowlist, code, doc, err):
    if doc is None:
        resolved = [g for g in seen["globals"] if g not in allowlist]
        return f"no report (exit {code}): {err.strip()[:200]}" if resolved else ""
    reports = doc if isinstance(doc, list) else [doc]
    findings = [f for r in reports for f in r.get("findings", [])]
    named = {py3_name(f.get("global")) for f in findings if f["severity"] in ("warning", "error") and f.get("global")}
    missed = sorted({g for g in seen["globals"] if g not in allowlist and g not in named})
    problems = []
    if missed:
        problems.append("torch resolves " + ", ".join(missed[:5]) + (" ..." if len(missed) > 5 else "") +
                        "; optstate names none of them")
    if seen["container"] == "torchscript" and not any(f["rule"] == "torchscript-archive" for f in findings):
        problems.append("torch hands it to torch.jit.load; optstate does not say so")
    if len(reports) == 1 and "error" not in reports[0] and (other := container_read(seen, reports[0])):
        problems.append(other)
    return "; ".join(problems)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--optstate", required=True)
    ap.add_argument("--torch26", required=True, help="a command that runs python with torch 2.6")
    ap.add_argument("--torch113", help="python with torch 1.13")
    ap.add_argument("--known")
    ap.add_argument("--if-present", action="append", default=[],
                    help="a directory checked only when it exists (../shared/peer-corpus: other projects' data, "
                         "read in place, absent from a user's clone)")
    ap.add_argument("--mutations", type=int, default=0,
                    help="also this many seeded structured mutations (mutate_for_torch_load.py) of the real "
                         "torch.save zips and legacy files under testdata/good")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("paths", nargs="+")
    args = ap.parse_args()
    present = [d for d in args.if_present if os.path.isdir(d)]
    for d in args.if_present:
        if d not in present:
            print(f"skipped: {d} is absent")
    files = [os.path.abspath(f) for f in files_of(args.paths + present)]
    root = os.path.commonpath([REPO] + files)
    known = {}
    if args.known:
        with open(args.known) as f:
            known = json.load(f)
    os.makedirs(os.path.join(REPO, "testdata/.torch-load-oracle"), exist_ok=True)
    tmp = tempfile.mkdtemp(dir=os.path.join(REPO, "testdata/.torch-load-oracle"))
    mutations = {}
    if args.mutations:
        bases = sorted(f for f in files_of([os.path.join(REPO, "testdata/good")])
                       if zipfile.is_zipfile(f) or f.endswith("_legacy.pt"))
        out = os.path.join(tmp, "mutations")
        subprocess.run([sys.executable, "-W", "ignore", os.path.join(REPO, "tests/oracle/mutate_for_torch_load.py"),
                        out, str(args.mutations), str(args.seed)] + bases, check=True, capture_output=True)
        with open(os.path.join(out, "mutations.json")) as f:
            mutations = {os.path.join(out, k): v for k, v in json.load(f).items()}
        files = sorted(files + list(mutations))
        root = os.path.commonpath([REPO] + files)
    runs = [("torch26", ["bash", os.path.abspath(args.torch26)], True)]
    if args.torch113:
        runs.append(("torch113", [args.torch113], False))
    # One validate per file, as many at once as there are cores (each is one thread).
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        reports = dict(zip(files, pool.map(lambda f: validate(args.optstate, f), files)))
    failed = 0
    allowlist26 = None
    for tag, python, chroot in runs:
        seen = record(python, chroot, root, files, tmp)
        if allowlist26 is None:
            allowlist26 = set(seen["allowlist"])
        agree = 0
        for f in files:
            d = judge(seen["files"][f], allowlist26, *reports[f])
            key = f"{tag} {os.path.relpath(f, REPO)}"
            if not d:
                agree += 1
                if key in known:
                    print(f"NOW AGREES (remove from known): {key}")
                    failed += 1
            elif key in known:
                agree += 1
                print(f"known: {key}: {d} ({known[key]})")
            else:
                failed += 1
                how = f" (mutation of {mutations[f]['base']}: {', '.join(mutations[f]['steps'])}; --seed " \
                      f"{args.seed})" if f in mutations else ""
                print(f"DISAGREES {key}: {d}{how}")
        print(f"torch.load oracle ({tag} {seen['torch']}): {agree}/{len(files)} files agree")
    subprocess.run(["rm", "-rf", tmp])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
