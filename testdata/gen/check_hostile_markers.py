"""Proof that real torch runs each payload of gen_hostile_torchload.py (run by hand only: it runs them).

Usage (inside the torch 2.6 chroot, or /usr/bin/python3 for torch 1.13 -- only in a throwaway
root, never on a machine you care about): check_hostile_markers.py DIR OUT_JSON [--expect RECORDED]
(--expect: exit 1 unless every case ran or did not as RECORDED says; ctest hostile_markers_torch26
runs it in the chroot, where the payloads touch only the chroot's /tmp.)
Each DIR/<case>.pt is loaded in a fresh subprocess with a 60 s limit, as its cases.json "marker"
says: "file" torch.load(weights_only=False), then /tmp/optstate-marker-<case> must exist;
"stdout" the same, and the import's output must appear; "nested" the same, then
pickle.loads(state["extra"]) as code that unpickles a bytes value does; "alloc"
torch.load(weights_only=True) and the bytearray it returns has the named size; "jit" with
torch.jit.load wrapped to note that torch handed the file to it. Writes {torch, cases: {case:
{"ran": bool, "how": text}}}.
"""
import json
import os
import subprocess
import sys

CHILD = r'''
import os, pickle, sys, torch
path, case, marker = sys.argv[1], sys.argv[2], sys.argv[3]
if marker == "alloc":
    obj = torch.load(path, weights_only=True)
    print("ALLOCATED", len(obj["extra"]))
elif marker == "jit":
    real = torch.jit.load
    def noted(*a, **k):
        print("JIT_LOAD_CALLED")
        return real(*a, **k)
    torch.jit.load = noted
    torch.load(path, weights_only=False)
else:
    obj = torch.load(path, weights_only=False)
    if marker == "nested":
        pickle.loads(obj["extra"])
'''

EXPECT = {"stdout": {"import_this": "The Zen of Python"}}


def main():
    d, out = sys.argv[1], sys.argv[2]
    expect = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--expect" else None
    with open(os.path.join(d, "cases.json")) as f:
        cases = json.load(f)
    import torch
    result = {"torch": torch.__version__.split("+")[0], "cases": {}}
    for case, info in sorted(cases.items()):
        marker_file = f"/tmp/optstate-marker-{case}"
        if os.path.exists(marker_file):
            os.remove(marker_file)
        try:
            p = subprocess.run([sys.executable, "-W", "ignore", "-c", CHILD, os.path.join(d, case + ".pt"), case,
                                info["marker"]], capture_output=True, text=True, timeout=60)
            text = p.stdout + p.stderr
        except subprocess.TimeoutExpired:
            text = "timed out"
        m = info["marker"]
        if m in ("file", "nested"):
            ran, how = os.path.exists(marker_file), f"{marker_file} written"
        elif m == "stdout":
            ran, how = EXPECT["stdout"][case] in text, f"printed '{EXPECT['stdout'][case]}' at import"
        elif m == "alloc":
            line = next((x for x in text.splitlines() if x.startswith("ALLOCATED")), "")
            ran, how = bool(line), f"weights_only=True returned a bytearray of {line.split()[-1] if line else '?'} bytes"
        elif m == "jit":
            ran, how = "JIT_LOAD_CALLED" in text, "torch.load called torch.jit.load"
        else:  # "none": the marker is looked for all the same
            ran, how = os.path.exists(marker_file), f"{marker_file} written"
        if os.path.exists(marker_file):
            os.remove(marker_file)
        last = [x for x in text.strip().splitlines() if x.strip()][-1:] or [""]
        result["cases"][case] = {"ran": ran, "how": how if ran else "did not: " + last[0][:200]}
        print(case, "RAN" if ran else "no", result["cases"][case]["how"])
    with open(out, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
        f.write("\n")
    if expect:  # CI: this torch still does with each file what the committed record says
        with open(expect) as f:
            want = json.load(f)["cases"]
        differ = [c for c in result["cases"] if c in want and want[c]["ran"] != result["cases"][c]["ran"]]
        differ += [c for c in result["cases"] if c not in want]
        print(f"{len(result['cases']) - len(differ)}/{len(result['cases'])} cases as recorded in {expect}")
        sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
