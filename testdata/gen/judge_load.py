"""Records what torch.load(weights_only=True) does with every file of a corpus.

Usage: python3 testdata/gen/judge_load.py DIR...   (run under torch 2.6: its default load is the judge)
Writes DIR/load_judgement.json: {"torch": version, "files": {file: {"ok": bool, "error": first line}}}
for every file corpus.json lists, whichever torch wrote it.
"""
import json
import os
import sys

import torch



def judge(path):
    """ok, and for a refusal the unpickler's own reason (torch 2.6 puts it after a generic preamble)."""
    try:
        torch.load(path, map_location="cpu", weights_only=True)
        return {"ok": True}
    except Exception as e:  # noqa: BLE001 - any refusal is the answer
        text = str(e)
        marker = "WeightsUnpickler error:"
        reason = text.split(marker, 1)[1] if marker in text else text
        lines = [ln.strip() for ln in reason.strip().splitlines() if ln.strip()]
        return {"ok": False, "error": (lines[0] if lines else type(e).__name__)[:300]}


def main():
    for d in sys.argv[1:]:
        with open(os.path.join(d, "corpus.json")) as f:
            corpus = json.load(f)
        files = {c["file"]: judge(os.path.join(d, c["file"])) for c in corpus["cases"]}
        with open(os.path.join(d, "load_judgement.json"), "w") as f:
            json.dump({"torch": torch.__version__.split("+")[0], "judge": "torch.load(weights_only=True)",
                       "files": files}, f, indent=1, sort_keys=True)
            f.write("\n")
        refused = sum(not v["ok"] for v in files.values())
        print(f"{d}: {len(files)} files judged, {refused} refused by torch {torch.__version__}")


if __name__ == "__main__":
    main()
