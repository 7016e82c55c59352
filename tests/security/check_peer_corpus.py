"""validate on other scanners' samples, where torch.load would unpickle them: the verdicts asserted.

Usage: python3 tests/security/check_peer_corpus.py OPTSTATE_BINARY
Reads ../shared/peer-corpus/ in place (never copied into the project; its README and
MANIFEST.json say what each file is). Exit 77 (ctest's skip) when it is absent.
Each picklescan sample as committed (raw pickles, zips, legacy files: data/, data2/), and placed as
data.pkl of a torch zip or as a legacy file's main pickle (wrapped-zip/, wrapped-legacy/):
  malicious -> validate exits 1 naming a global at error level (dangerous-global or
               unknown-global-called, or import-runs-code for a module whose import runs code), and
               its findings name every global the peer expects
               (see unnamed_globals), except the files in KNOWN_GAPS, which must still
               fail as recorded there (so that closing a gap updates this list);
               and those in UNREACHABLE (torch.load cannot unpickle them), which exit 2;
  benign    -> no error (exit 0, or 2 for a file that is no checkpoint at all).
The totals count UNREACHABLE files apart ("N torch.load cannot unpickle").
Also modelscan's unsafe zip. Prints the totals per container.
"""
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(os.path.dirname(REPO), "shared", "peer-corpus")

# Files that still pass where a peer flags them, each with the exit it gives today. None now:
# malicious6's second pickle after data.pkl's STOP, which torch.load's zip path never reads, is
# pickle-tampered with its globals named (the legacy path reads it as pickle 2 of the stream).
KNOWN_GAPS = {}

# picklescan's own files, as they are: torch.load (weights_only=False) cannot unpickle these,
# so nothing in them runs and validate's answer is "not a checkpoint" (exit 2). Every other
# malicious one must exit 1 like the wrapped copies.
UNREACHABLE = {
    "data/malicious1.7z": "a 7z archive",
    "data/malicious1.zip": "data.pkl at the zip's top level: torch's reader wants a top directory",
    "data/malicious1_central_directory.zip": "data.pkl at the zip's top level",
    "data/malicious1_wrong_ext.zip": "data.pkl at the zip's top level",
    "data2/malicious1_crc.zip": "data.pkl at the zip's top level",
    "data/malicious1_0x1.zip": "no data.pkl record (model/config.pkl)",
    "data/malicious1_0x20.zip": "no data.pkl record",
    "data/malicious1_0x40.zip": "no data.pkl record",
    "data/malicious6.pkl": "the first pickle is benign and not the magic number: the legacy path raises after it",
    "data2/dns_exfiltration.npy": "a .npy file: its header is no pickle, so the legacy path fails at byte 0",
}


# Globals a peer expects that validate rightly does not name: torch 2.6's weights_only allowlist
# has them (the danger in those samples is named instead: pickle.loads, builtins.eval).
ALLOWLISTED_BY_TORCH = {"_codecs.encode", "torch._utils._rebuild_tensor"}


# pytorch_magic_bypass.pt is five pickles whose fifth calls posix.system; its wrapped copies hold them
# where torch.load unpickles only the first (zip: data.pkl is one pickle) or the first two (legacy: as
# the main pickle and the storage keys, then raw storage bytes): posix.system never runs there.
NOT_REACHED = {
    "wrapped-zip/data__pytorch_magic_bypass.pt.pt": {"posix.system"},
    "wrapped-legacy/data__pytorch_magic_bypass.pt.pt": {"posix.system"},
}


def unnamed_globals(expected, findings):
    """The peer's expected globals no finding names (its ' (susp)' notes and placeholder names such as
    'unknown.os' dropped; an attribute path like bdb.Bdb.run is named by bdb.Bdb)."""
    text = " ".join(f["message"] + " " + f["path"] for f in findings)
    lacking = []
    for g in expected:
        g = g.replace(" (susp)", "")
        if g in ALLOWLISTED_BY_TORCH or g.startswith("unknown.") or g.endswith(".unknown") or g[0].isdigit():
            continue
        if g not in text and g.rsplit(".", 1)[0] not in text:
            lacking.append(g)
    return lacking


def run(binary, path):
    r = subprocess.run([binary, "validate", "--json", path], capture_output=True, text=True)
    errors = []
    findings = []
    if r.returncode in (0, 1):
        doc = json.loads(r.stdout)
        findings = doc.get("findings", [])
        errors = [f for f in findings if f.get("severity") == "error"]
    return r.returncode, errors, findings


def main():
    binary = os.path.abspath(sys.argv[1])
    manifest = os.path.join(CORPUS, "picklescan", "MANIFEST.json")
    if not os.path.exists(manifest):
        print(f"SKIP: {CORPUS} is absent (a fresh clone has no ../shared)")
        return 77
    files = json.load(open(manifest))["files"]
    gaps = KNOWN_GAPS
    failed, totals = [], {}
    for f in files:
        if not f["file"].startswith(("wrapped-zip/", "wrapped-legacy/", "data/", "data2/")) or \
                f["peer_expected"] not in ("malicious", "benign"):
            continue
        code, errors, findings = run(binary, os.path.join(CORPUS, "picklescan", f["file"]))
        kind = (f["file"].split("/")[0], f["peer_expected"])
        ok = totals.setdefault(kind, [0, 0, 0])
        ok[1] += 1
        ok[2] += f["file"] in UNREACHABLE
        if f["peer_expected"] == "benign":
            good = code != 1  # clean, or not a checkpoint at all (exit 2: not_a_pickle.bin)
        elif f["file"] in UNREACHABLE:
            good = code == 2
        elif f["file"] in gaps:
            good = code == gaps[f["file"]]
            if code == 1 and errors:
                failed.append(f"{f['file']}: now caught; remove it from KNOWN_GAPS")
                good = True
        else:
            good = code == 1 and any(e["rule"] in ("dangerous-global", "unknown-global-called", "import-runs-code") for e in errors)
            expected = [g for g in f.get("expected_globals", []) if g not in NOT_REACHED.get(f["file"], set())]
            lacking = unnamed_globals(expected, findings) if good else []
            if lacking:
                failed.append(f"{f['file']}: caught, but {lacking} not named")
        caught = code == 1 if f["peer_expected"] == "malicious" else code != 1
        ok[0] += caught
        if not good:
            failed.append(f"{f['file']} ({f['peer_expected']}): exit {code}, errors {[e['rule'] for e in errors]}")
    # modelscan's unsafe sample leaves extra objects on the stack at STOP, which CPython accepts.
    code, errors, _ = run(binary, os.path.join(CORPUS, "modelscan", "pytorch", "unsafe_zip_pytorch.pt"))
    caught = code == 1 and any(e["rule"] in ("dangerous-global", "unknown-global-called", "import-runs-code") for e in errors)
    print(f"modelscan/pytorch/unsafe_zip_pytorch.pt: exit {code}, {'caught' if caught else 'NOT caught'}")
    if not caught:
        failed.append(f"modelscan/pytorch/unsafe_zip_pytorch.pt: exit {code}, errors {[e['rule'] for e in errors]}")
    for (where, verdict), (n, total, unreachable) in sorted(totals.items()):
        apart = f" ({unreachable} more that torch.load cannot unpickle: exit 2)" if unreachable else ""
        print(f"{where:15} {verdict:9} {'caught' if verdict == 'malicious' else 'clean'} {n}/{total - unreachable}"
              f"{apart}")
    for line in failed:
        print("FAIL " + line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
