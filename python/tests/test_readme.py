"""README.md's Python example runs from the clone and prints what README.md
says it prints (under torch 1.13 on bookworm and torch 2.6 on trixie)."""

import contextlib
import io
import pathlib
import re

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def readme_example():
    text = (REPO / "README.md").read_text()
    section = text[text.index("\n## Python\n"):]
    section = section[:section.index("\n## ", 1)]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    printed = re.search(r"\nprints\n\n```text\n(.*?)```", section, re.S)
    assert code and printed, "README.md's Python section lost its example or its output"
    return code.group(1), printed.group(1)


def test_readme_example_prints_what_readme_says(monkeypatch):
    pytest.importorskip("torch")
    code, printed = readme_example()
    monkeypatch.chdir(REPO)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {"__name__": "readme_example"})
    assert out.getvalue() == printed
