"""Differential oracles over an enumerated corpus (testdata/gen/gen_enumerated_corpus.py).

Usage: check_corpus.py --optstate BIN --read-oracle BIN [--known FILE]
                       [--outputs DIR --torch113 PYTHON --torch26 RUNNER] DIR...

Each DIR holds corpus.json (what the generating run knows of every case), <file>.expected.json
(what torch.load showed) and load_judgement.json (what torch 2.6's default torch.load did).
Every case is put to each oracle; none of them is optstate's opinion of itself:
  read        optstate reads the file as torch.load did (optstate_read_oracle, describe.py's dump)
  load        validate's prediction of torch.load(weights_only=True) equals torch 2.6's judgement
  validate    a healthy file gets no warning or error; an injected fault is found by its rule
              (an error one with exit 1); a file torch cannot read is exit 2 naming file and offset
  verify      a healthy file's state verifies with no finding
  algorithm   verify names the torch.optim class that saved the state, or says it cannot
  outputs     (with --outputs) what repack and remap write of a healthy file loads in torch 2.6 with
              weights_only=True and resumes bit for bit (resume_oracle.py, in each torch)
  rank_sets   every rank's file of one distributed save (cases sharing a "rank_set"; a FULL_STATE_DICT
              file is a set of one) verifies, validates
              and matches as one set with no finding; a sharded or full set that names its "truth" (the run in
              one process) unshards to exactly that run's state, which resumes bit for bit after
              remap --to index (compare_truth.py); with --outputs, what repack writes of every rank
              loads in torch 2.6 in a process group of the saving world, equal to the original
              (rank_outputs.py)
The counts are printed as "<oracle>: N/M cases agree". A disagreement fails the run unless
FILE (tests/oracle/known_divergences.json) lists it with its reason; a listed one that now
agrees fails too, so the list only shrinks. Exit 0 when every disagreement is listed, 1 otherwise.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ORACLES = ("read", "load", "validate", "verify", "algorithm", "outputs", "rank_sets")
# What optstate writes from one torch.save file; each output goes to resume_oracle.py.
WRITERS = {"repack": ["repack"], "remap": ["remap", "--to", "index"]}
# torch 2.x saves Adam and AdamW alike (only the coupling of weight decay differs, which
# the file does not record): either name, or the pair, is right for either class.
ADAM_NAMES = {"adam", "adamw", "adam-or-adamw"}
REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def run_json(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    try:
        doc = json.loads(p.stdout) if p.stdout.strip() else None
    except json.JSONDecodeError:
        doc = None
    return p.returncode, doc, p.stderr.strip()


def state_key_args(path, expected):
    """--state-key when the file holds more than one optimizer (SparseAdam beside a dense Adam)."""
    top = [item["key"].get("value") for item in expected["root"].get("items", [])]
    return ["--state-key", "optimizer"] if sum(1 for k in top if str(k).startswith("optimizer")) > 1 else []


# Warnings a healthy file may get: the ones that say torch 2.6's default torch.load refuses it,
# and only where torch 2.6 did refuse it.
REFUSAL_WARNINGS = {"global-not-allowlisted", "global-needs-import"}


def judge_validate(case, code, doc, err, judgement):
    if not case.get("torch_reads", True):  # torch.load refuses it: optstate must, clearly, with exit 2
        if code != 2:
            return f"exit {code} on a file torch cannot read"
        return "" if case["file"] in err and "offset" in err else f"the error names no file or offset: {err[:160]}"
    if doc is None:
        return f"no report (exit {code}): {err[:200]}"
    reports = doc if isinstance(doc, list) else [doc]
    findings = [f for r in reports for f in r.get("findings", [])]
    loud = [f for f in findings if f["severity"] in ("warning", "error")]
    if judgement is not None and not judgement["ok"]:
        loud = [f for f in loud if not (f["severity"] == "warning" and f["rule"] in REFUSAL_WARNINGS)]
    if case["healthy"]:
        if code != 0 or loud:
            return "; ".join(f"{f['severity']} {f['rule']}: {f['message'][:120]}" for f in loud[:3]) or f"exit {code}"
        return ""
    want = case.get("expect_rule")
    found = [f for f in findings if f["rule"] == want]
    if want and not found:
        return f"{want} did not fire (found: " + ", ".join(sorted({f['rule'] for f in findings})) + ")"
    if any(f["severity"] == "error" for f in found) and code != 1:
        return f"{want} is an error, yet exit {code}"
    return ""


def judge_load(code, doc, judgement):
    if judgement is None:
        return "torch 2.6 did not judge this file"
    if code == 2:  # unreadable (the report is an error document): refused, as torch must refuse it
        return "" if not judgement["ok"] else "optstate cannot read a file torch 2.6 loads"
    if doc is None:
        return "no report"
    reports = doc if isinstance(doc, list) else [doc]
    pred = reports[0].get("torch_load")
    if pred is None:
        return "validate gives no torch.load prediction"
    said = pred.get("weights_only")
    if said == "unknown":
        return "validate could not predict: " + "; ".join(pred.get("reasons", []))
    torch_ok = judgement["ok"]
    if (said == "accepts") != torch_ok:
        reasons = "; ".join(pred.get("reasons", []))
        return (f"predicted {said}" + (f" ({reasons[:160]})" if reasons else "") +
                f", torch 2.6 {'accepts' if torch_ok else 'refuses: ' + judgement.get('error', '')[:120]}")
    return ""


def judge_verify(case, code, doc, err):
    if not case["healthy"]:
        return None  # no promise about an unhealthy file's replay
    if doc is None:
        return f"no report (exit {code}): {err[:200]}"
    if code != 0 or doc.get("findings"):
        fs = doc.get("findings") or []
        return (f"exit {code}; " + "; ".join(f"{f['check']} {f['param']}: {f['message'][:100]}" for f in fs[:3]))
    return ""


def judge_algorithm(case, doc):
    if doc is None:
        return "no verify report"
    name = doc.get("algorithm", "")
    cls = case["class"].rsplit(".", 1)[-1].lower()
    if cls in ("adam", "adamw"):
        ok = name in ADAM_NAMES and (name == "adam-or-adamw" or name == cls)
    else:
        ok = name == cls
    if ok:
        return ""
    if name == "unknown" and not doc.get("replay_applicable", True):
        return f"named unknown, not {cls}"
    return f"named {name}, saved by {cls}"


def write_manifest(case, tmp):
    """The parameters in optimizer order as the generating run recorded them (schemas/param-manifest)."""
    path = os.path.join(tmp, case["case"] + ".manifest.json")
    params = [{k: p[k] for k in ("name", "shape", "dtype", "group")} for p in case["params"]]
    with open(path, "w") as f:
        json.dump({"format": "optstate-param-manifest", "version": 1, "params": params}, f)
    return path


def write_outputs(d, case, key, manifest, out_dir, args):
    """optstate's outputs of a healthy case, for the torch runners; "" or what failed."""
    problems = []
    for name, cmd in WRITERS.items():
        if name == "remap" and (case["kind"] == "scheduler-alone" or case.get("model_object")):
            continue  # no optimizer state, or no model state_dict (a pickled nn.Module), to remap against
        out = os.path.join(out_dir, f"{case['case']}.{name}.pt")
        args_ = key + manifest if name == "remap" else []
        p = subprocess.run([args.optstate] + cmd + [os.path.join(d, case["file"]), "-o", out, "--no-sync"] + args_,
                           capture_output=True, text=True)
        if p.returncode != 0:
            problems.append(f"{name} exit {p.returncode}: {p.stderr.strip()[:160]}")
    return "; ".join(problems)


def judge_outputs(d, out_dir, args, write_problems):
    """Runs resume_oracle.py under each torch that can judge this directory; {case: difference}."""
    tag = os.path.basename(os.path.normpath(d))
    runners = []
    if tag == "torch113" and args.torch113:
        runners.append(("torch 1.13", [args.torch113]))
    if args.torch26:
        runners.append(("torch 2.6", ["bash", args.torch26]))
    diffs = {c: ([w] if w else []) for c, w in write_problems.items()}
    for label, runner in runners:
        result = os.path.join(out_dir, "resume." + label.replace(" ", "") + ".json")
        rel = lambda p: os.path.relpath(p, REPO)  # noqa: E731 - the chroot sees the repository at /work
        p = subprocess.run(runner + ["-W", "ignore", rel(os.path.join(REPO, "tests/oracle/resume_oracle.py")),
                                     rel(os.path.abspath(d)), rel(out_dir), rel(result)],
                           capture_output=True, text=True, cwd=REPO)
        if p.returncode != 0:
            sys.exit(f"check_corpus: resume_oracle.py under {label} failed: {p.stderr.strip()[-600:]}")
        with open(result) as f:
            judged = json.load(f)
        for c in write_problems:
            for w in WRITERS:
                r = judged.get(f"{c}.{w}")
                if r is None:
                    if not write_problems[c] and w != "remap":
                        diffs[c].append(f"{label}: {w} output not judged")
                    continue
                if r["loads"]:
                    diffs[c].append(f"{label}: {w}: {r['loads']}")
                elif r.get("resumes"):
                    diffs[c].append(f"{label}: {w}: {r['resumes']}")
    return {c: "; ".join(v) for c, v in diffs.items()}


def judge_rank_set(d, name, cases, args):
    """One distributed save's rank files, judged as a set; "" or what differs."""
    files = [os.path.join(d, c["file"]) for c in sorted(cases, key=lambda c: c["case"])]
    problems = []
    for cmd in ("verify", "collisions", "validate"):
        code, doc, err = run_json([args.optstate, cmd] + files + ["--json"])
        if doc is None:
            problems.append(f"{cmd}: no report (exit {code}): {err[:200]}")
            continue
        reports = doc if isinstance(doc, list) else [doc]
        if cmd == "validate":
            loud = [f for r in reports for f in r.get("findings", []) if f["severity"] in ("warning", "error")
                    and not (f["severity"] == "warning" and f["rule"] in REFUSAL_WARNINGS)]
            found = "; ".join(f"{f['rule']}: {f['message'][:100]}" for f in loud[:2])
        elif cmd == "verify":
            found = "; ".join(f"{f['check']} {f['param']}: {f['message'][:100]}"
                              for r in reports for f in (r.get("findings") or [])[:2])
        else:
            found = ""
        if code != 0 or found:
            problems.append(f"{cmd} exit {code}" + (f": {found}" if found else ""))
    if args.outputs and args.torch26:  # what repack writes of each rank loads in its process group, unchanged
        out_dir = os.path.join(args.outputs, "rank_sets")
        os.makedirs(out_dir, exist_ok=True)
        pairs = []
        for f in files:
            written = os.path.join(out_dir, os.path.basename(f))
            p = subprocess.run([args.optstate, "repack", f, "-o", written, "--no-sync"], capture_output=True, text=True)
            if p.returncode != 0:
                problems.append(f"repack exit {p.returncode}: {p.stderr.strip()[:200]}")
                break
            pairs += [os.path.relpath(os.path.abspath(f), REPO), os.path.relpath(written, REPO)]
        else:
            result = os.path.join(out_dir, name + ".result.json")
            p = subprocess.run(["bash", args.torch26, "-W", "ignore", "tests/oracle/rank_outputs.py",
                                os.path.relpath(result, REPO), str(len(files))] + pairs,
                               capture_output=True, text=True, cwd=REPO)
            if p.returncode != 0:
                problems.append(f"rank_outputs.py failed: {p.stderr.strip()[-300:]}")
            else:
                with open(result) as fh:
                    problems += [f"repack of {os.path.basename(k)}: {v}" for k, v in json.load(fh).items() if v]
    truth = cases[0].get("truth")
    layout = cases[0].get("fsdp1", {}).get("layout", "")
    if truth and ("SHARDED_STATE_DICT" in layout or "FULL_STATE_DICT" in layout):
        # A FULL_STATE_DICT file is whole already: it is compared as it is, and remapped.
        full = "FULL_STATE_DICT" in layout
        unsharded = files[0] if full else os.path.join(args.tmp, name + ".unsharded.pt")
        remapped = os.path.join(args.tmp, name + ".remapped.pt")
        steps = [] if full else [["unshard"] + files + ["-o", unsharded]]
        for cmd in steps + [["remap", "--to", "index", unsharded, "-o", remapped]]:
            p = subprocess.run([args.optstate] + cmd + ["--no-sync"], capture_output=True, text=True)
            if p.returncode != 0:
                return "; ".join(problems + [f"{cmd[0]} exit {p.returncode}: {p.stderr.strip()[:200]}"])
        p = subprocess.run([sys.executable, "-W", "ignore", os.path.join(REPO, "tests/oracle/compare_truth.py"),
                            os.path.join(d, truth), unsharded, remapped] + (["--whole"] if full else []),
                           capture_output=True, text=True)
        said = p.stdout.strip()
        if said != "agrees":
            problems.append(f"against the run's truth: {said or p.stderr.strip()[-300:]}")
    return "; ".join(problems)


def check_dir(d, args, slot):
    with open(os.path.join(d, "corpus.json")) as f:
        corpus = json.load(f)
    try:
        with open(os.path.join(d, "load_judgement.json")) as f:
            judgements = json.load(f)["files"]
    except FileNotFoundError:
        judgements = {}
    read = {}
    p = subprocess.run([args.read_oracle, d], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"check_corpus: {args.read_oracle} {d} failed: {p.stderr.strip()}")
    for line in p.stdout.splitlines():
        r = json.loads(line)
        read[r["file"]] = r["difference"]
    tag = os.path.basename(os.path.normpath(d))
    results = []  # (oracle, tag, case, difference or "")
    write_problems = {}
    for case in corpus["cases"]:
        path = os.path.join(d, case["file"])
        key = []
        if case.get("torch_reads", True):
            with open(path + ".expected.json") as f:
                key = state_key_args(path, json.load(f))
            results.append(("read", tag, case["case"], read.get(case["file"], "not read by the read oracle")))
        vcode, vdoc, verr = run_json([args.optstate, "validate", path, "--json"] + key)
        results.append(("load", tag, case["case"], judge_load(vcode, vdoc, judgements.get(case["file"]))))
        results.append(("validate", tag, case["case"], judge_validate(case, vcode, vdoc, verr, judgements.get(case["file"]))))
        manifest = []
        if case["param_groups"] > 1:  # the model alone cannot order several groups: the run's truth does
            manifest = ["--manifest", write_manifest(case, args.tmp)]
        # FSDP1's ShardedTensors load only in a process group of the saving world size, and FSDP2's
        # DTensor shards step only in one: the outputs oracle, run in one plain process, cannot judge
        # them; the rank_sets oracle judges what optstate writes of them (unshard, then remap).
        if args.outputs and case["healthy"] and case["kind"] not in ("fsdp1", "fsdp2"):
            out_dir = os.path.join(args.outputs, slot)
            os.makedirs(out_dir, exist_ok=True)
            write_problems[case["case"]] = write_outputs(d, case, key, manifest, out_dir, args)
        if case["kind"] == "scheduler-alone":
            continue  # no optimizer: nothing to verify
        rcode, rdoc, rerr = run_json([args.optstate, "verify", path, "--json"] + key + manifest)
        v = judge_verify(case, rcode, rdoc, rerr)
        if v is not None:
            results.append(("verify", tag, case["case"], v))
            results.append(("algorithm", tag, case["case"], judge_algorithm(case, rdoc)))
    if args.outputs and write_problems:
        for c, diff in judge_outputs(d, os.path.join(args.outputs, slot), args, write_problems).items():
            results.append(("outputs", tag, c, diff))
    sets = {}
    for case in corpus["cases"]:
        if case.get("rank_set"):
            sets.setdefault(case["rank_set"], []).append(case)
    for name, cases in sorted(sets.items()):
        results.append(("rank_sets", tag, name, judge_rank_set(d, name, cases, args)))
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--optstate", required=True)
    ap.add_argument("--read-oracle", required=True)
    ap.add_argument("--known", help="known divergences (JSON: {\"<oracle> <dir> <case>\": reason})")
    ap.add_argument("--outputs", help="a directory inside the repository for optstate's outputs (the outputs "
                    "oracle runs only with it)")
    ap.add_argument("--torch113", help="python with torch 1.13, to resume the torch113 corpus's outputs")
    ap.add_argument("--torch26", help="testdata/gen/torch26-python.sh (or a wrapper): torch 2.6 judges every output")
    ap.add_argument("dirs", nargs="+")
    args = ap.parse_args()
    args.tmp = tempfile.mkdtemp(prefix="optstate-oracle-")
    known = {}
    if args.known:
        with open(args.known) as f:
            known = json.load(f)["divergences"]
    results = []
    try:
        for i, d in enumerate(args.dirs):
            results += check_dir(d, args, f"{i}.{os.path.basename(os.path.normpath(d))}")
    finally:
        shutil.rmtree(args.tmp, ignore_errors=True)
    failed = False
    for oracle in ORACLES:
        mine = [r for r in results if r[0] == oracle]
        agree = sum(1 for r in mine if not r[3])
        listed = sum(1 for r in mine if r[3] and f"{r[0]} {r[1]} {r[2]}" in known)
        print(f"{oracle}: {agree}/{len(mine)} cases agree" + (f" ({listed} known divergences)" if listed else ""))
    seen = set()
    for oracle, tag, case, diff in results:
        k = f"{oracle} {tag} {case}"
        seen.add(k)
        if diff and k not in known:
            print(f"DISAGREES {k}: {diff}")
            failed = True
        elif diff:
            print(f"known divergence {k}: {diff} ({known[k]})")
        elif k in known:
            print(f"AGREES NOW {k} (remove it from {args.known})")
            failed = True
    dirs = {os.path.basename(os.path.normpath(d)) for d in args.dirs}
    for k in known:
        if k.split(" ")[1] in dirs and k not in seen:
            print(f"STALE {k}: no such case in the corpus")
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
