#!/usr/bin/env python3
"""The docs say what the binary does: every example in README.md and docs/ runs
with the output shown, and each command's page shows its --help as it is.

Two kinds of marked blocks, in any Markdown file of the repository's top or docs/:

  <!-- help: optstate inspect -->      the next fenced block must equal
  ```text                              `optstate inspect --help` exactly, so
  ...                                  every flag is on the page and no flag
  ```                                  the binary lacks is

  <!-- run -->                          the next fenced block is a console
  ```console                           transcript: each `$ optstate ...` line runs
  $ optstate inspect FILE              (in a scratch directory that sees the
  ...output...                         repository's testdata/), and its stdout
  ```                                  must be the lines below it, exactly

`<!-- run: excerpt -->` checks only that the lines shown come in order in the
output (a line ending in " ..." matches any line that starts with the rest);
`exits 1 0` after run says each command's exit code (default 0).

Every docs/commands/<command>.md must exist for each subcommand `optstate
--help` lists, and hold a help block for it.

Usage: tests/docs/check_docs.py BINARY [--update]   (from the repository root)
  --update rewrites help blocks and exact run outputs from the binary (review the diff)
"""
import os
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile

MARKER = re.compile(r"^<!-- (help: (?P<help>[a-z -]+)|run(?P<opts>[^>]*)) -->$")


def blocks(text):
    """(marker match, index of the block's first content line, index of its closing fence)."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = MARKER.match(lines[i])
        if m:
            if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
                raise SystemExit(f"marker at line {i + 1} is not followed by a fenced block")
            end = next((j for j in range(i + 2, len(lines)) if lines[j] == "```"), None)
            if end is None:
                raise SystemExit(f"fenced block after line {i + 1} does not end")
            yield m, i + 2, end
            i = end
        i += 1


def run(binary, argv, cwd):
    proc = subprocess.run([binary] + argv, cwd=cwd, capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout


def matches_excerpt(shown, actual):
    at = 0
    for want in shown:
        while at < len(actual):
            got = actual[at]
            at += 1
            if got == want or (want.endswith(" ...") and got.startswith(want[:-4])):
                break
        else:
            return f"line not found in order: {want!r}"
    return None


def check_file(path, binary, scratch, update, failures):
    text = path.read_text()
    lines = text.split("\n")
    helps = []
    for m, start, end in reversed(list(blocks(text))):
        where = f"{path}:{start}"
        if m.group("help") is not None:
            words = m.group("help").split()
            helps.append(" ".join(words))
            code, out = run(binary, words[1:] + ["--help"], scratch)
            want = out.rstrip("\n").split("\n")
            if lines[start:end] != want:
                if update:
                    lines[start:end] = want
                else:
                    failures.append(f"{where}: the page's `{' '.join(words)} --help` differs from the binary's")
            continue
        opts = m.group("opts")
        excerpt = "excerpt" in opts
        exits = [int(x) for x in re.findall(r"\d+", opts.split("exits", 1)[1])] if "exits" in opts else []
        body = lines[start:end]
        commands = [k for k, line in enumerate(body) if line.startswith("$ ")]
        if not commands:
            failures.append(f"{where}: a run block without a `$ ` line")
            continue
        rebuilt = []
        for n, k in enumerate(commands):
            argv = shlex.split(body[k][2:], comments=True)
            if argv[0] != "optstate":
                failures.append(f"{where}: only optstate runs: {body[k]}")
                continue
            shown = body[k + 1:commands[n + 1] if n + 1 < len(commands) else len(body)]
            code, out = run(binary, argv[1:], scratch)
            actual = out.rstrip("\n").split("\n") if out else []
            want_exit = exits[n] if n < len(exits) else 0
            if code != want_exit:
                failures.append(f"{where}: `{body[k][2:]}` exited {code}, the page says {want_exit}")
            if excerpt:
                problem = matches_excerpt(shown, actual)
                if problem:
                    failures.append(f"{where}: `{body[k][2:]}`: {problem}")
                rebuilt += [body[k]] + shown
            else:
                if shown != actual and not update:
                    failures.append(f"{where}: `{body[k][2:]}` printed other output than the page shows")
                rebuilt += [body[k]] + actual
        if update and not excerpt:
            lines[start:end] = rebuilt
    if update:
        path.write_text("\n".join(lines))
    return helps


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    binary = os.path.abspath(sys.argv[1])
    update = "--update" in sys.argv[2:]
    repo = pathlib.Path(".").resolve()
    files = sorted(list(repo.glob("*.md")) + list((repo / "docs").rglob("*.md")))
    failures = []
    shown_helps = set()
    with tempfile.TemporaryDirectory(prefix="optstate-docs.") as scratch:
        os.symlink(repo / "testdata", os.path.join(scratch, "testdata"))
        for path in files:
            shown_helps.update(check_file(path.relative_to(repo), binary, scratch, update, failures))
        _, top = run(binary, ["--help"], scratch)
    commands = re.findall(r"^  ([a-z][a-z-]*) ", top.split("Subcommands:", 1)[1], re.M)
    for c in commands:
        page = repo / "docs" / "commands" / f"{c}.md"
        if not page.exists():
            failures.append(f"docs/commands/{c}.md is missing")
        elif f"optstate {c}" not in shown_helps:
            failures.append(f"docs/commands/{c}.md does not show `optstate {c} --help`")
    for f in failures:
        print("FAIL", f)
    print(f"{len(files)} files, {len(commands)} command pages: {'ok' if not failures else f'{len(failures)} failures'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
