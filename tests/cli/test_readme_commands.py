"""Every `splitplan …` command line shown in README.md and docs/tutorial.md runs and exits 0.

Lines are taken from fenced bash blocks; a line may chain commands with `&&` (only the `splitplan`
parts run) and pipe or redirect its output (cut off before `|` / `>`). Commands run in a temporary
folder, so the files they write do not land in the checkout; arguments naming files of the checkout
(or of ../shared beside it) are made absolute. The README's bare `splitplan search` solves the
full-size problem and is marked slow.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from splitplan.cli import main

ROOT = Path(__file__).resolve().parents[2]
DOCS = (ROOT / "README.md", ROOT / "docs" / "tutorial.md")
_FENCE = re.compile(r"^```(\w*)\s*$")
_SEP = {";", "&&", "||"}
_CUT = {"|", ">", ">>", "2>", "&>"}


def bash_lines(path: Path) -> list[str]:
    """Command lines of the fenced ```bash / ```sh / ```console blocks of a Markdown file."""
    out, lang = [], None
    for line in path.read_text().splitlines():
        m = _FENCE.match(line.strip())
        if m:
            lang = None if lang is not None else (m.group(1) or "text")
            continue
        if lang in ("bash", "sh", "shell", "console") and line.strip():
            out.append(line.strip().removeprefix("$ "))
    return out


def splitplan_commands(line: str) -> list[list[str]]:
    """The argv (after `splitplan`) of each `splitplan` command of a shell line."""
    commands: list[list[str]] = []
    current: list[str] | None = None
    skipping = False  # inside another program's arguments, or right of a pipe / redirection
    for tok in shlex.split(line, comments=True):
        if tok in _SEP or tok in _CUT:
            if current is not None:
                commands.append(current)
            current, skipping = None, tok in _CUT
        elif skipping:
            continue
        elif current is None:
            if tok == "splitplan":
                current = []
            else:
                skipping = True
        else:
            current.append(tok)
    if current is not None:
        commands.append(current)
    return commands


def documented_commands() -> list[tuple[str, list[str]]]:
    found = []
    for doc in DOCS:
        for line in bash_lines(doc):
            for argv in splitplan_commands(line):
                found.append((f"{doc.name}: splitplan {' '.join(argv)}", argv))
    return found


COMMANDS = documented_commands()
SLOW = {"README.md: splitplan search"}


def _absolutize(argv: list[str]) -> list[str]:
    out = []
    for arg in argv:
        candidate = ROOT / arg
        if not arg.startswith("-") and ("/" in arg or "." in arg) and candidate.exists():
            out.append(str(candidate.resolve()))
        else:
            out.append(arg)
    return out


def _needs_shared(argv: list[str]) -> bool:
    return any("../shared" in a or a.endswith("splitwise-sim-compat.toml") for a in argv)


def _run(argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    if _needs_shared(argv) and not (ROOT.parent / "shared").is_dir():
        pytest.skip("needs the reference data in ../shared")
    monkeypatch.chdir(tmp_path)
    return main(_absolutize(argv))


def test_extraction_finds_the_documented_commands():
    ids = [c[0] for c in COMMANDS]
    assert "README.md: splitplan search" in ids
    assert any(i.startswith("tutorial.md: splitplan simulate") for i in ids)
    assert any(i.startswith("tutorial.md: splitplan search") for i in ids)
    assert any(i.startswith("tutorial.md: splitplan catalog") for i in ids)
    assert splitplan_commands("pip install . && splitplan search") == [["search"]]
    assert splitplan_commands("splitplan simulate --json | python -c 'x'") == [["simulate", "--json"]]
    assert splitplan_commands("splitplan catalog > out.txt") == [["catalog"]]


@pytest.mark.parametrize(
    ("label", "argv"),
    [c for c in COMMANDS if c[0] not in SLOW],
    ids=[c[0] for c in COMMANDS if c[0] not in SLOW],
)
def test_documented_command_runs(label, argv, tmp_path, monkeypatch, capsys):
    code = _run(argv, tmp_path, monkeypatch)
    captured = capsys.readouterr()
    assert code == 0, f"{label} exited {code}: {captured.err[-2000:]}"
    assert captured.out.strip(), f"{label} printed nothing"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("label", "argv"), [c for c in COMMANDS if c[0] in SLOW], ids=[c[0] for c in COMMANDS if c[0] in SLOW]
)
def test_documented_full_size_command_runs(label, argv, tmp_path, monkeypatch, capsys):
    code = _run(argv, tmp_path, monkeypatch)
    captured = capsys.readouterr()
    assert code == 0, f"{label} exited {code}: {captured.err[-2000:]}"
    assert "Winner" in captured.out or "winner" in captured.out.lower()
