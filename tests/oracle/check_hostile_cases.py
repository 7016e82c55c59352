"""Every hostile fixture against optstate validate: the rule each technique must trip, and the
resources optstate may spend on any hostile file.

Usage: check_hostile_cases.py OPTSTATE [--no-resource-limits]
testdata/hostile/torchload/cases.json (gen_hostile_torchload.py) names, per file, the rule that must
fire; validate must exit 1 with it (every attack is a finding with a rule id, never only exit 2), or,
for a case with a "severity" ("warning", "info"), exit 0 with it at that severity. A case without a rule is
benign and must pass (exit 0, no error).
Real torch running each payload is recorded beside it (markers.torch26.json, markers.torch113.json,
check_hostile_markers.py, run by hand) and shown here. Every file under testdata/hostile (and
each DCP directory there) is validated within 64 MiB of peak RSS and 1 s of CPU (not with
--no-resource-limits, which a sanitized build passes: its shadow memory alone is ~100 MiB).
Ends with 'N passed, N failed'.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CASES = os.path.join(REPO, "testdata/hostile/torchload")
MAX_RSS_KIB = 64 * 1024
MAX_CPU_S = 1.0
# Over the limits today, with the reason: the check still runs them and prints their figures.
OVER_LIMITS = {}


def run(optstate, path):
    """validate --json in a child whose own peak RSS (KiB) and CPU seconds are read back (wait4)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen([optstate, "validate", path, "--json"], stdout=out, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return (p.returncode, out.read().decode(errors="replace"), err.read().decode(errors="replace"),
                usage.ru_maxrss, usage.ru_utime + usage.ru_stime)


def main():
    optstate = sys.argv[1]
    limits = "--no-resource-limits" not in sys.argv[2:]  # a sanitized build: rules only, figures printed
    with open(os.path.join(CASES, "cases.json")) as f:
        cases = json.load(f)
    ran = {}
    for tag in ("torch26", "torch113"):
        path = os.path.join(CASES, f"markers.{tag}.json")
        if os.path.exists(path):
            with open(path) as f:
                ran[tag] = json.load(f)["cases"]
    passed = failed = 0
    for case, info in sorted(cases.items()):
        code, out, err, _, _ = run(optstate, os.path.join(CASES, case + ".pt"))
        try:
            doc = json.loads(out)
            rules = {x["rule"] for x in doc["findings"] if x["severity"] == "error"}
            lesser = {(x["rule"], x["severity"]) for x in doc["findings"] if x["severity"] != "error"}
        except (json.JSONDecodeError, KeyError):
            rules, lesser = set(), set()
        torch_says = "; ".join(f"{t}: {'runs' if r[case]['ran'] else 'does not run'}" for t, r in ran.items()
                               if case in r)
        if info["rule"] is None:  # benign: passes the default gate, with the warnings it earns
            ok = code == 0 and not rules
            passed, failed = passed + ok, failed + (not ok)
            print(f"{'ok  ' if ok else 'FAIL'} {case}: benign, exit {code}{', errors ' + str(sorted(rules)) if rules else ''}")
            continue
        if "severity" in info:  # a finding, not an attack: the file passes with it
            ok = code == 0 and not rules and (info["rule"], info["severity"]) in lesser
            passed, failed = passed + ok, failed + (not ok)
            print(f"{'ok  ' if ok else 'FAIL'} {case}: {info['rule']} ({info['severity']}), exit {code}"
                  f"{', errors ' + str(sorted(rules)) if rules else ''} ({torch_says})")
            continue
        if code == 1 and info["rule"] in rules:
            passed += 1
            print(f"ok   {case}: {info['rule']} ({torch_says})")
        else:
            failed += 1
            print(f"FAIL {case}: exit {code}, errors {sorted(rules)}, want {info['rule']}: {err.strip()[:200]}")
    # A framework directory checks what the framework loads from directories inside it: HF Trainer's
    # real checkpoint-6 with a DeepSpeed-named file under global_step6/ holding a payload.
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = os.path.join(tmp, "checkpoint-6")
        shutil.copytree(os.path.join(REPO, "testdata/frameworks/dirs_torch26/hf_trainer/checkpoint-6"), run_dir)
        os.makedirs(os.path.join(run_dir, "global_step6"))
        shutil.copy(os.path.join(CASES, "rebuild_list_args.pt"),
                    os.path.join(run_dir, "global_step6", "zero_pp_rank_0_mp_rank_00_optim_states.pt"))
        code, out, err, _, _ = run(optstate, run_dir)
        named = "global_step6/zero_pp_rank_0_mp_rank_00_optim_states.pt" in out and "dangerous-global" in out
        passed, failed = passed + (code == 1 and named), failed + (not (code == 1 and named))
        print(f"{'ok  ' if code == 1 and named else 'FAIL'} framework subdirectory: exit {code}, "
              f"the nested file's payload {'found' if named else 'missed'}")
    hostile = os.path.join(REPO, "testdata/hostile")
    targets = []
    for root, dirs, files in os.walk(hostile):
        if os.path.exists(os.path.join(root, ".metadata")):
            targets.append(root)
            dirs[:] = []
            continue
        targets += [os.path.join(root, n) for n in sorted(files) if not n.endswith(".json")]
    worst_rss = worst_cpu = 0
    for t in sorted(targets):
        code, _, _, rss, cpu = run(optstate, t)
        worst_cpu, worst_rss = max(worst_cpu, cpu), max(worst_rss, rss)
        if code not in (0, 1, 2):
            failed += 1
            print(f"FAIL {os.path.relpath(t, REPO)}: exit {code}")
        rel = os.path.relpath(t, REPO)
        if not limits:
            continue
        if (cpu > MAX_CPU_S or rss > MAX_RSS_KIB) and rel in OVER_LIMITS:
            print(f"known {rel}: {cpu:.2f} s CPU, peak RSS {rss // 1024} MiB ({OVER_LIMITS[rel]})")
        elif cpu > MAX_CPU_S or rss > MAX_RSS_KIB:
            failed += 1
            print(f"FAIL {rel}: {cpu:.2f} s CPU, peak RSS {rss // 1024} MiB")
    passed += 1
    print(f"ok   {len(targets)} hostile files and directories: at most {worst_cpu:.2f} s CPU, "
          f"{worst_rss // 1024} MiB peak RSS with the known ones " +
          (f"(limits {MAX_CPU_S} s, {MAX_RSS_KIB // 1024} MiB)" if limits else "(limits not held: a sanitized build)"))
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
