"""Checks optstate's reading of real HeavyBall 0.24.4 + FSDP2 files against truth.

Usage (torch 2.6): check_heavyball_fsdp2.py SRC SCRATCH
  SRC      testdata/heavyball/fsdp2_0.24.4 (rank files + truth.rank<N>.json)
  SCRATCH  what check_heavyball_fsdp2.sh wrote: per case (and .local variant)
           collisions.json, collisions.rank<N>.json, rank<N>.optim[.local].pt
For every case: collisions names exactly the parameters that truly shared a key
as one group and assigns every single owner its own key; remap's output loads
with weights_only=True (after importing torch.distributed.tensor), keyed 0..n-1,
each single owner's local shards bit for bit the ones HeavyBall saved for it,
each merged parameter's moments zero.
"""
import hashlib
import json
import os
import sys

import torch
import torch.distributed.tensor  # noqa: F401  (allowlists DTensor for weights_only)


def sha(t):
    t = t.detach().contiguous()
    return hashlib.sha256(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"").hexdigest()


def fail(msg):
    print("FAIL", msg)
    sys.exit(1)


def check_collisions(doc, truth, where):
    names = [p["name"] for p in truth["params"]]
    want_groups = sorted(sorted(s["params"]) for s in truth["state"] if len(s["params"]) > 1)
    got_groups = sorted(sorted(c["params"]) for c in doc["collisions"])
    if got_groups != want_groups:
        fail(f"{where}: collision groups {got_groups}, truth {want_groups}")
    for s in truth["state"]:
        key = f"(0, ({', '.join(map(str, s['key'][1]))}{',' if len(s['key'][1]) == 1 else ''}))"
        k = next((k for k in doc["keys"] if k["key"] == key), None)
        if k is None:
            fail(f"{where}: no key {key}")
        want = "collided" if len(s["params"]) > 1 else "assigned"
        if k["fate"] != want or sorted(k["params"]) != sorted(s["params"]):
            fail(f"{where}: {key} is {k['fate']} to {k['params']}, truth {want} to {s['params']}")
    if doc["orphans"] or doc["ambiguous"] or doc["without_state"]:
        fail(f"{where}: orphans/ambiguous/without_state not empty")
    return names


def local(v):
    return v.to_local() if hasattr(v, "to_local") else v


def check_remapped(path, truth, where):
    sd = torch.load(path, weights_only=True)
    n = len(truth["params"])
    if sorted(sd["state"].keys()) != list(range(n)) or sd["param_groups"][0]["params"] != list(range(n)):
        fail(f"{where}: keys {sorted(sd['state'].keys())}")
    by_key = {json.dumps(s["key"]): s for s in truth["state"]}
    for i, p in enumerate(truth["params"]):
        s = by_key[json.dumps(p["keys"][0])]
        entry = sd["state"][i]
        for field in ("exp_avg", "exp_avg_sq"):
            t = local(entry[field])
            if len(s["params"]) > 1:
                if t.abs().sum() != 0:
                    fail(f"{where}: {p['name']}.{field} of a merged entry is not reset to zero")
            elif sha(t) != s["fields"][field]["sha256"]:
                fail(f"{where}: {p['name']}.{field} differs from what HeavyBall saved for it")


def main():
    src, scratch = sys.argv[1], sys.argv[2]
    checked = 0
    for case in ("adamw_foreach", "adamw_perparam", "soap"):
        truth = [json.load(open(os.path.join(src, case, f"truth.rank{r}.json"))) for r in (0, 1)]
        for kind in ("", ".local"):
            out = os.path.join(scratch, case + kind)
            with open(os.path.join(out, "collisions.json")) as f:
                check_collisions(json.load(f), truth[0], f"{case}{kind} rank set")
            for r in (0, 1):
                if not kind:
                    with open(os.path.join(out, f"collisions.rank{r}.json")) as f:
                        check_collisions(json.load(f), truth[r], f"{case} rank {r}")
                check_remapped(os.path.join(out, f"rank{r}.optim{kind}.pt"), truth[r], f"{case}{kind} rank {r}")
                checked += 1
    print(f"ok: {checked} remapped rank files match HeavyBall's truth")


if __name__ == "__main__":
    main()
