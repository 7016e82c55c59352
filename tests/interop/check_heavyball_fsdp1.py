"""optstate on real HeavyBall 0.24.4 + FSDP1 rank files, held to what the run recorded.

Usage: check_heavyball_fsdp1.py OPTSTATE   (from the repository root; no torch needed)
testdata/heavyball/fsdp1_0.24.4/<case>/ (gen_heavyball_fsdp1.py), for case orig (use_orig_params=True)
and flat (False):
1. collisions of the LOCAL rank set (rank<r>.pt, each with its own model) reports every rank on its
   own (HeavyBall keyed each rank's own pieces by its own addresses): every entry it assigns is
   assigned to the parameter truth.rank<r>.json says the key was computed from; every entry it does
   not assign is held back as ambiguous, and only where the rank has another piece of that shape; no
   collision or orphan is invented; exit 1 exactly when something is held back.
2. collisions of FSDP.optim_state_dict's output (rank<r>.sharded.pt: HeavyBall's pointer-keyed pieces
   beside ShardedTensor parameters) places a piece only in the parameter the run keyed it from (a
   piece that is its parameter's whole); every other is an orphan that says FSDP.optim_state_dict
   passed it through, or held back; exit 1.
3. the same of rank0.full.pt (FULL_STATE_DICT, kept by rank 0): its pieces were never gathered, and
   every orphan says so.
Ends with 'N passed, N failed'.
"""
import json
import os
import subprocess
import sys

SRC = "testdata/heavyball/fsdp1_0.24.4"


def run(optstate, *args):
    p = subprocess.run([optstate, "collisions", "--json", *args], capture_output=True, text=True)
    return p.returncode, json.loads(p.stdout) if p.stdout.strip() else None, p.stderr


def plain(name):
    """The FSDP-wrapped name as FSDP1's LOCAL_STATE_DICT spells it: wrapper segments dropped."""
    return ".".join(part for part in name.split(".") if part != "_fsdp_wrapped_module")


def key_text(key):
    return f"({key[0]}, ({', '.join(str(d) for d in key[1])},))" if len(key[1]) == 1 else \
        f"({key[0]}, ({', '.join(str(d) for d in key[1])}))"


def check_local(optstate, case):
    code, doc, err = run(optstate, f"{SRC}/{case}/rank0.pt", f"{SRC}/{case}/rank1.pt")
    if doc is None or "ranks" not in doc:
        return [f"{case}: no rank-set report (exit {code}): {(err.strip() or json.dumps(doc))[:300]}"]
    problems, held_back = [], 0
    for r, rank in enumerate(doc["ranks"]):
        report = rank.get("report")
        if report is None:
            return [f"{case}: rank {r} has no report of its own"]
        with open(f"{SRC}/{case}/truth.rank{r}.json") as f:
            truth = json.load(f)
        owner = {key_text(s["key"]): [plain(n) for n in s["params"]] for s in truth["state"]}
        shape_of = {plain(p["name"]): p["local_shape"] for p in truth["params"]}
        for k in report["keys"]:
            want = owner.get(k["key"])
            if want is None:
                problems.append(f"{case} rank {r}: {k['key']} is no key the run made")
            elif k["fate"] == "assigned":
                if k["params"] != want:
                    problems.append(f"{case} rank {r}: {k['key']} assigned to {k['params']}, the run keyed {want}")
            elif k["fate"] == "ambiguous":
                held_back += 1
                shape = shape_of[want[0]]
                siblings = [s for s in truth["state"] if [plain(n) for n in s["params"]] != want
                            and s["params"] and shape_of[plain(s["params"][0])] == shape]
                if not siblings:
                    problems.append(f"{case} rank {r}: {k['key']} held back, yet no other piece has shape {shape}")
            else:
                problems.append(f"{case} rank {r}: {k['key']} is {k['fate']}, the run keyed {want}")
        if report["collisions"] or report["orphans"]:
            problems.append(f"{case} rank {r}: collisions or orphans reported, the run had none")
    if code != (1 if held_back else 0):
        problems.append(f"{case}: exit {code} with {held_back} entries held back")
    return problems


def check_sharded(optstate, case, files=("rank0.sharded.pt", "rank1.sharded.pt"),
                  said="FSDP.optim_state_dict passed through"):
    problems = []
    for r, name in enumerate(files):
        code, doc, err = run(optstate, f"{SRC}/{case}/{name}")
        if doc is None or "keys" not in doc:
            problems.append(f"{case} sharded rank {r}: no report (exit {code}): {(err.strip() or json.dumps(doc))[:300]}")
            continue
        with open(f"{SRC}/{case}/truth.rank{r}.json") as f:
            owner = {key_text(s["key"]): [plain(n) for n in s["params"]] for s in json.load(f)["state"]}
        for k in doc["keys"]:
            if k["fate"] == "assigned":  # a piece that is its parameter's whole (rank 1 holds all of up.bias)
                if k["params"] != owner.get(k["key"]):
                    problems.append(f"{case} sharded rank {r}: {k['key']} placed in {k['params']}, "
                                    f"the run keyed {owner.get(k['key'])}")
            elif k["fate"] == "orphan" and said not in k.get("reason", ""):
                problems.append(f"{case} sharded rank {r}: {k['key']} an orphan for another reason: {k.get('reason')}")
        if code != 1:
            problems.append(f"{case} sharded rank {r}: exit {code}")
    return problems


def check_full(optstate, case):
    """rank0.full.pt: under FULL_STATE_DICT FSDP.optim_state_dict gathers nothing of HeavyBall's pointer
    keys: rank 0's own pieces beside whole parameters, each an orphan that says it was never gathered."""
    return check_sharded(optstate, case, files=("rank0.full.pt",), said="never gathered")


def main():
    optstate = sys.argv[1]
    passed = failed = 0
    for case in ("orig", "flat"):
        for name, check in (("local rank set", check_local), ("FSDP.optim_state_dict", check_sharded),
                            ("FULL_STATE_DICT", check_full)):
            problems = check(optstate, case)
            if problems:
                failed += 1
                print(f"FAIL {case} {name}:")
                for p in problems[:10]:
                    print("  " + p)
            else:
                passed += 1
                print(f"ok   {case} {name}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
