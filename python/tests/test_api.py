"""The optstate package against the optstate binary: each function returns the
document the command prints with --json for the same input, raises the error
class its code names, and safe_load refuses what validate fails.

Run from the repository's top with the package importable and OPTSTATE_BINARY
naming the binary of the same build (tests/CMakeLists.txt does both).
"""

import json
import os
import pathlib
import re
import subprocess

import pytest

import optstate

REPO = pathlib.Path(__file__).resolve().parents[2]
BINARY = os.environ.get("OPTSTATE_BINARY", str(REPO / "build" / "release" / "tools" / "optstate"))
GOOD = REPO / "testdata" / "good" / "torch113"
GOOD26 = REPO / "testdata" / "good" / "torch26"
HOSTILE = REPO / "testdata" / "hostile"


def cli(*args):
    """(exit code, --json document) of the binary."""
    done = subprocess.run([BINARY, *map(str, args)], cwd=REPO, capture_output=True)
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else None


@pytest.fixture(autouse=True)
def at_repo(monkeypatch):
    monkeypatch.chdir(REPO)


@pytest.mark.parametrize("name", ["adamw_index.pt", "adamw_legacy.pt", "adamw_index.pt.zst", "heavyball_ptr_shape.pt"])
def test_inspect_equals_cli(name):
    path = f"testdata/good/torch113/{name}"
    if not (REPO / path).exists():
        pytest.skip(f"{path} not in this tree")
    code, doc = cli("inspect", "--json", path)
    assert code == 0
    assert optstate.inspect(path) == doc
    assert optstate.inspect(pathlib.Path(path)) == doc  # os.PathLike as well


def test_inspect_flags_reach_the_command():
    path = "testdata/good/torch113/adamw_index.pt"
    assert optstate.inspect(path, depth=1, records=True) == cli("inspect", "--json", "--depth", "1", "--records",
                                                                  path)[1]


@pytest.mark.parametrize("name", sorted(p.name for p in GOOD.glob("*.pt"))[:12])
def test_validate_equals_cli(name):
    path = f"testdata/good/torch113/{name}"
    code, doc = cli("validate", "--json", path)
    assert code in (0, 1)
    assert optstate.validate(path) == doc


def test_validate_no_values_and_rank_files():
    files = sorted(str(p.relative_to(REPO)) for p in (REPO / "testdata/heavyball/fsdp2_0.24.4/adamw_foreach").glob(
        "rank*.optim.pt"))
    models = [f.replace(".optim.", ".model.") for f in files]
    if len(files) < 2:
        pytest.skip("no rank set in this tree")
    expected = cli("validate", "--json", "--no-values", *files, *[a for m in models for a in ("--model", m)])[1]
    assert optstate.validate(files, model=models, no_values=True) == expected


def test_validate_strict_raises_with_the_report():
    path = "testdata/hostile/builtins_eval.pt"
    report = optstate.validate(path)
    assert report["passed"] is False
    with pytest.raises(optstate.CheckpointInvalid) as caught:
        optstate.validate(path, strict=True)
    assert caught.value.report == report
    assert [f["rule"] for f in caught.value.findings] == ["dangerous-global"]


def test_collisions_and_verify_equal_cli():
    path = "testdata/good/torch113/adamw_index.pt"
    assert optstate.collisions(path) == cli("collisions", "--json", path)[1]
    assert optstate.verify(path) == cli("verify", "--json", path)[1]


def test_collisions_found_are_a_result_not_an_error():
    path = "testdata/good/torch113/heavyball_fsdp_collision.pt"
    manifest = "testdata/good/torch113/heavyball_fsdp_collision.manifest.json"
    code, expected = cli("collisions", "--json", path, "--manifest", manifest)
    assert code == 1
    assert optstate.collisions(path, manifest=manifest) == expected


def test_errors_carry_code_and_context():
    with pytest.raises(optstate.NotFoundError) as caught:
        optstate.inspect("testdata/no/such/file.pt")
    assert caught.value.code == "not_found"
    assert str(caught.value) == "testdata/no/such/file.pt: cannot open: No such file or directory"
    assert isinstance(caught.value, FileNotFoundError)
    code, doc = cli("inspect", "--json", "testdata/hostile/binunicode8_huge.pt")
    assert code == 2
    with pytest.raises(optstate.Error) as caught:
        optstate.inspect("testdata/hostile/binunicode8_huge.pt")
    assert (caught.value.code, caught.value.message) == (doc["error"]["code"], doc["error"]["message"])
    assert type(caught.value).__name__ != "Error"  # the subclass its code names


def test_remap_writes_what_the_cli_writes(tmp_path):
    src = "testdata/good/torch113/heavyball_ptr_shape.pt"
    manifest = "testdata/good/torch113/heavyball_ptr_shape.manifest.json"
    (tmp_path / "cli").mkdir()
    (tmp_path / "py").mkdir()  # the same file name: torch.save names the zip's records after it
    expected = cli("remap", "--json", src, "--manifest", manifest, "-o", tmp_path / "cli/fixed.pt", "--no-sync")[1]
    doc = optstate.remap(src, tmp_path / "py/fixed.pt", manifest=manifest, sync=False)
    expected["output"] = doc["output"]
    assert doc == expected
    assert (tmp_path / "py/fixed.pt").read_bytes() == (tmp_path / "cli/fixed.pt").read_bytes()


def same_file_name_outputs(tmp_path, name):
    (tmp_path / "cli").mkdir()
    (tmp_path / "py").mkdir()
    return tmp_path / "cli" / name, tmp_path / "py" / name


def test_migrate_writes_what_the_cli_writes(tmp_path):
    case = "testdata/heavyball/migrate/0.24.4/adamw_foreach"
    cli_out, py_out = same_file_name_outputs(tmp_path, "hb3.pt")
    code, expected = cli("migrate", "--json", f"{case}/optim.pt", "--manifest", f"{case}/manifest.json",
                         "-o", cli_out, "--no-sync")
    assert code == 0
    doc = optstate.migrate(f"{case}/optim.pt", py_out, manifest=f"{case}/manifest.json", sync=False)
    expected["output"] = doc["output"]
    assert doc == expected
    assert py_out.read_bytes() == cli_out.read_bytes()


@pytest.mark.parametrize("source", ["testdata/good/torch26/fsdp2_dcp", "testdata/frameworks/deepspeed_0.16.4/zero2"])
def test_consolidate_writes_what_the_cli_writes(tmp_path, source):
    cli_out, py_out = same_file_name_outputs(tmp_path, "whole.pt")
    code, expected = cli("consolidate", "--json", source, "-o", cli_out, "--no-sync", "--to", "index")
    assert code == 0
    doc = optstate.consolidate(source, py_out, to="index", sync=False)
    expected["output"] = doc["output"]
    assert doc == expected
    assert py_out.read_bytes() == cli_out.read_bytes()


def test_remap_refusal_raises_and_writes_nothing(tmp_path):
    out = tmp_path / "out.pt"
    path = "testdata/good/torch113/heavyball_fsdp_collision.pt"
    manifest = "testdata/good/torch113/heavyball_fsdp_collision.manifest.json"
    with pytest.raises(optstate.Refused) as caught:
        optstate.remap(path, out, manifest=manifest)
    assert caught.value.code == "invalid_argument"
    assert "state was merged across parameters (fc1.weight, fc2.weight;" in caught.value.message
    assert list(tmp_path.iterdir()) == []
    doc = optstate.remap(path, out, manifest=manifest, on_collision="reset", sync=False)
    assert doc["output"] == str(out) and out.exists()


def test_safe_load_refuses_every_file_validate_fails():
    refused = 0
    for path in sorted(HOSTILE.glob("*.pt")):
        code, report = cli("validate", "--json", path)
        if code == 1:
            with pytest.raises(optstate.UnsafeCheckpoint):
                optstate.safe_load(path)
            refused += 1
        elif code == 2:
            with pytest.raises(optstate.Error):
                optstate.safe_load(path)
    assert refused >= 20


def test_safe_load_loads_what_passes():
    torch = pytest.importorskip("torch")
    path = "testdata/good/torch113/model_tied.pt"
    loaded = optstate.safe_load(path)
    direct = torch.load(path, weights_only=True)
    assert loaded.keys() == direct.keys()
    assert all(torch.equal(loaded[k], direct[k]) for k in direct)


def test_checked_torch_load_guards_code_that_calls_torch_load():
    torch = pytest.importorskip("torch")
    original = torch.load
    with optstate.checked_torch_load():
        with pytest.raises(optstate.UnsafeCheckpoint):
            torch.load("testdata/hostile/builtins_eval.pt")
        state = torch.load("testdata/good/torch113/model_tied.pt")
        assert sorted(state) == sorted(original("testdata/good/torch113/model_tied.pt", weights_only=True))
    assert torch.load is original
    with pytest.raises(RuntimeError):
        with optstate.checked_torch_load():
            raise RuntimeError("the block fails")
    assert torch.load is original


def test_run_is_the_command_line():
    code, out, err = optstate.run(["--version"])
    assert (code, err) == (0, b"")
    assert re.fullmatch(rf"optstate {re.escape(optstate.__version__)}( \(git [0-9a-z.-]+\))?\n", out.decode())


def test_the_worked_example_in_docs_runs():
    text = (REPO / "docs" / "python.md").read_text()
    start = text.index("```python\nimport optstate\n\nckpt")
    code = text[start + len("```python\n"):text.index("```\n", start + 10)]
    exec(compile(code, "docs/python.md", "exec"), {})
