"""CLI golden tests: run the real optstate binary, compare exit code, stdout, stderr.

Each case is tests/cli/cases/NAME.case, a small text file:
    # what the case shows (comments are ignored)
    args: inspect --json testdata/good/torch113/adamw_index.pt
    schema: schemas/inspect.schema.json      (optional: stdout must validate)
and its expectation tests/cli/cases/NAME.expected:
    exit: 0
    --- stdout
    ...exact text...
    --- stderr
    ...exact text...
Cases run from the repository root, so paths in args and output are relative.
A case may add `corrupt: PATH OFFSET HEX` to run on a copy of
PATH with the byte at OFFSET replaced (corruption cases on real fixtures): the word
CORRUPT in args names the copy. TMP/NAME in args is NAME in a scratch directory made
for the run (for outputs that must not exist beforehand); output shows it as NAME.

Usage: run_golden.py --binary PATH [--update] [CASE...]
  --update rewrites the .expected files from what the binary does now; review
  the diff before committing.
Ends with 'N passed, N failed'.
"""
import argparse
import difflib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CASES = os.path.join(REPO, "tests", "cli", "cases")


def parse_case(path):
    spec = {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            key, _, value = line.partition(":")
            spec[key.strip()] = value.strip()
    if "args" not in spec:
        raise ValueError(f"{path}: no 'args:' line")
    return spec


def render(code, out, err):
    return f"exit: {code}\n--- stdout\n{out}--- stderr\n{err}"


def validate(schema_path, text):
    import jsonschema
    with open(os.path.join(REPO, schema_path)) as f:
        schema = json.load(f)
    jsonschema.validate(json.loads(text), schema)


def binary_runner(binary):
    """Runs the optstate binary at BINARY: (exit code, stdout, stderr) of ARGS."""
    def run(args):
        proc = subprocess.run([binary] + args, cwd=REPO, capture_output=True, text=True, timeout=60)
        return proc.returncode, proc.stdout, proc.stderr
    return run


def run_case(runner, name, spec, tmp):
    args = shlex.split(spec["args"])
    if "corrupt" in spec:
        src, offset, hexbyte = spec["corrupt"].split()
        copy = os.path.join(tmp, "CORRUPT")
        shutil.copyfile(os.path.join(REPO, src), copy)
        with open(copy, "r+b") as f:
            f.seek(int(offset))
            f.write(bytes([int(hexbyte, 16)]))
        args = [copy if a == "CORRUPT" else a for a in args]
    # TMP/NAME: a path in this run's scratch directory (outputs that must not exist yet).
    args = [a.replace("TMP/", tmp + "/") for a in args]
    code, stdout, stderr = runner(args)
    # `--version` names the commit of a clone; the goldens hold the version alone.
    out = re.sub(r" \(git [0-9A-Za-z.+_-]+\)\n", "\n", stdout.replace(tmp + "/", ""))
    err = stderr.replace(tmp + "/", "")
    if "schema" in spec:
        validate(spec["schema"], stdout)
    return render(code, out, err)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--update", action="store_true")
    ap.add_argument("cases", nargs="*")
    a = ap.parse_args()
    names = a.cases or sorted(f[:-5] for f in os.listdir(CASES) if f.endswith(".case"))
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            spec = parse_case(os.path.join(CASES, name + ".case"))
            expected_path = os.path.join(CASES, name + ".expected")
            try:
                actual = run_case(binary_runner(os.path.abspath(a.binary)), name, spec, tmp)
            except Exception as e:  # noqa: BLE001 - schema failures, timeouts
                failed += 1
                print(f"FAIL {name}: {type(e).__name__}: {str(e)[:2000]}")
                continue
            if a.update:
                with open(expected_path, "w") as f:
                    f.write(actual)
                print(f"updated {name}")
                passed += 1
                continue
            expected = open(expected_path).read() if os.path.exists(expected_path) else ""
            if actual == expected:
                passed += 1
                print(f"ok   {name}")
            else:
                failed += 1
                print(f"FAIL {name}:")
                sys.stdout.writelines(difflib.unified_diff(
                    expected.splitlines(True), actual.splitlines(True), "expected", "actual"))
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
