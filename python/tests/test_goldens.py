"""Every CLI golden case (tests/cli/cases) run in-process through the native
module gives what the binary gives: the same exit code, stdout and stderr, so
each function's document is the command's --json on every fixture."""

import pathlib
import sys

import pytest

import optstate

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "cli"))
import run_golden  # noqa: E402

# --distributed hands over to optstate-dist, a process of its own: not in-process.
NOT_IN_PROCESS = {"reshard_distributed_no_launcher"}
CASES = sorted(p.stem for p in (REPO / "tests" / "cli" / "cases").glob("*.case") if p.stem not in NOT_IN_PROCESS)


def in_process(args):
    code, out, err = optstate.run(args)
    return code, out.decode(), err.decode()


@pytest.mark.parametrize("name", CASES)
def test_golden_case_in_process(name, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    spec = run_golden.parse_case(str(REPO / "tests" / "cli" / "cases" / f"{name}.case"))
    actual = run_golden.run_case(in_process, name, spec, str(tmp_path))
    assert actual == (REPO / "tests" / "cli" / "cases" / f"{name}.expected").read_text()
