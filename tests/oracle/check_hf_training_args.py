"""HF Trainer's training_args.bin: the replicas behave as the real files do, and pass validate.

Usage:
  check_hf_training_args.py OPTSTATE                 CI: every replica in
      testdata/frameworks/hf_training_args/ makes the calls its era's real file makes while
      loading, and `optstate validate --json` gives it exit 0 and exactly the findings recorded
      for that real file
  check_hf_training_args.py OPTSTATE --record FILE ERA REPO COMMIT PATH [...]
      with real files (fetched by hand; CI cannot fetch): prints real_files.json's entries,
      each real file's calls and optstate's findings on it

The calls are observed with pickle's own Unpickler and stand-in classes (nothing of the file
runs): for each global, whether loading constructs it (REDUCE, NEWOBJ) and whether it BUILDs one
(how many times depends on the values a run chose, so only whether).
"""
import hashlib
import io
import json
import os
import pickle
import subprocess
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "..", "testdata", "frameworks", "hf_training_args")


def calls(path):
    """{module.name: [constructed, built]} of loading the file's data.pkl."""
    counts = {}

    class Recording(pickle.Unpickler):
        def find_class(self, module, name):
            key = f"{module}.{name}"
            counts.setdefault(key, [False, False])

            class Stand(object):
                def __new__(cls, *args, **kwargs):
                    counts[key][0] = True
                    return object.__new__(cls)

                def __init__(self, *args, **kwargs):
                    pass

                def __setstate__(self, state):
                    counts[key][1] = True

            return Stand

    with zipfile.ZipFile(path) as z:
        record = next(n for n in z.namelist() if n.endswith("/data.pkl"))
        Recording(io.BytesIO(z.read(record))).load()
    return dict(sorted(counts.items()))


def findings(optstate, path):
    run = subprocess.run([optstate, "validate", "--json", path], capture_output=True, text=True)
    report = json.loads(run.stdout)
    found = sorted({(f["rule"], f["severity"], f.get("global", "")) for f in report["findings"]})
    return run.returncode, [list(f) for f in found]


def record(optstate, args):
    entries = []
    for i in range(0, len(args), 5):
        path, era, repo, commit, repo_path = args[i:i + 5]
        data = open(path, "rb").read()
        code, found = findings(optstate, path)
        entries.append({"era": era, "repo": repo, "commit": commit, "path": repo_path,
                        "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data),
                        "calls": calls(path), "validate_exit": code, "findings": found})
    print(json.dumps(entries, indent=1))


def check(optstate):
    real = json.load(open(os.path.join(FIXTURES, "real_files.json")))
    failures = 0
    for entry in real:
        replica = os.path.join(FIXTURES, entry["era"], "training_args.bin")
        got_calls = calls(replica)
        code, found = findings(optstate, replica)
        problems = []
        if got_calls != entry["calls"]:
            problems.append(f"calls {got_calls} != the real file's {entry['calls']}")
        if code != entry["validate_exit"] or found != entry["findings"]:
            problems.append(f"validate exit {code} findings {found} != the real file's "
                            f"{entry['validate_exit']} {entry['findings']}")
        if entry["validate_exit"] != 0:
            problems.append("the real file does not pass the default gate")
        status = "FAIL " + "; ".join(problems) if problems else "ok"
        print(f"{entry['era']}: {len(found)} findings, exit {code}: {status}")
        failures += bool(problems)
    print(f"{len(real) - failures}/{len(real)} replicas behave as their real file")
    return 1 if failures else 0


def main():
    if len(sys.argv) > 2 and sys.argv[2] == "--record":
        record(sys.argv[1], sys.argv[3:])
        return 0
    return check(sys.argv[1])


if __name__ == "__main__":
    sys.exit(main())
