"""Every `splitplan …` command of README.md, docs/tutorial.md and the how-tos, run as a reader would
(in order, in one folder per document) in an 80-column terminal: each exits 0 and no header, design
name or other value of its output is cut to an ellipsis.

A document's TOML blocks whose first line names a file (`# slo.toml`) are written first, as the
reader would save them; a profile CSV the reader brings (`my_profile.csv`) is the reference table
of ../shared that the how-to names as its example. Commands left out, each with its reason: those
needing a Dask cluster, one that overwrites the shipped coefficients in the checkout, and (unless
`-m slow`) the full-size searches and the commands reading their output.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest

from splitplan.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_readme_commands import ROOT, _absolutize, bash_lines, splitplan_commands

DOCS = [ROOT / "README.md", ROOT / "docs" / "tutorial.md", *sorted((ROOT / "docs" / "howto").glob("*.md"))]
SHARED_PROFILE = ROOT.parent / "shared" / "reference" / "splitwise-sim" / "perf_model.csv"
BROUGHT = {"my_profile.csv": SHARED_PROFILE, "my_measurements.csv": SHARED_PROFILE}
_FENCE = re.compile(r"^```(\w*)\s*$")
# what makes a search (or a pareto run that searches) small: a cluster cap, explicit ranges
_SMALL = ("--max-machines", "--prompt-range", "--machines", "--prompt", "--duration")


def toml_files(path: Path) -> dict[str, str]:
    """TOML blocks whose first line is `# NAME.toml`, by NAME."""
    out, block, lang = {}, [], None
    for line in path.read_text().splitlines():
        m = _FENCE.match(line.strip())
        if m:
            if lang == "toml" and block and re.fullmatch(r"#\s*[\w.-]+\.toml", block[0].strip()):
                out[block[0].strip().lstrip("#").strip()] = "\n".join(block[1:]) + "\n"
            lang = None if lang is not None else (m.group(1) or "text")
            block = []
            continue
        if lang is not None:
            block.append(line)
    return out


def steps(path: Path) -> list[tuple[list[str], str | None]]:
    """(argv after `splitplan`, file its stdout is redirected to) in document order."""
    out = []
    lines: list[str] = []
    for raw in bash_lines(path):  # a trailing backslash continues the command on the next line
        if lines and lines[-1].endswith("\\"):
            lines[-1] = lines[-1][:-1] + " " + raw
        else:
            lines.append(raw)
    for line in lines:
        segment: list[str] = []
        for tok in [*shlex.split(line, comments=True), "&&"]:
            if tok not in (";", "&&", "||"):
                segment.append(tok)
                continue
            target = segment[segment.index(">") + 1] if ">" in segment[:-1] else None
            out.extend((argv, target) for argv in splitplan_commands(shlex.join(segment)))
            segment = []
    return out


def left_out(argv: list[str]) -> str | None:
    """Why a command is not run here (None: it is)."""
    if "--scheduler" in argv:
        return "needs a Dask cluster"
    if any(a.startswith("data/") for a in argv):
        return "overwrites the shipped coefficients in the checkout"
    return None


def full_size(argv: list[str]) -> bool:
    searches = argv[:1] == ["search"] or (
        argv[:1] == ["pareto"] and not any(a.endswith((".parquet", ".json")) for a in argv)
    )
    return searches and not any(a in _SMALL for a in argv)


def _outputs(argv: list[str], target: str | None) -> set[str]:
    outs = {
        argv[i + 1]
        for i, a in enumerate(argv[:-1])
        if a in ("--out", "--save-request", "--export-plan", "--plot")
    }
    return outs | ({target} if target else set())


def _run_doc(doc: Path, tmp_path: Path, monkeypatch, capsys, *, include_full: bool) -> list[str]:
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("LINES", "30")
    monkeypatch.chdir(tmp_path)
    for name, text in toml_files(doc).items():
        (tmp_path / name).write_text(text)
    ran = []
    unmade: set[str] = set()  # files only a command left out would have written
    for argv, target in steps(doc):
        label = f"{doc.name}: splitplan {' '.join(argv)}"
        made = _outputs(argv, target)
        if any(a in unmade and a not in made and not (tmp_path / a).exists() for a in argv):
            continue  # reads the output of a command left out
        if left_out(argv) or (full_size(argv) and not include_full):
            unmade.update(_outputs(argv, target))
            continue
        args = []
        for a in argv:
            if a in BROUGHT:
                if not BROUGHT[a].is_file():
                    pytest.skip(f"needs the reference table in ../shared for {a}")
                a = str(BROUGHT[a])
            args.append(a)
        code = main(_absolutize(args))
        cap = capsys.readouterr()
        assert code == 0, f"{label} exited {code}: {cap.err[-2000:]}"
        if target is not None:
            (tmp_path / target).write_text(cap.out)
        for line in cap.out.splitlines():
            assert "…" not in line, f"{label}: cut to an ellipsis at 80 columns:\n{cap.out}"
            if "--json" not in argv:  # a JSON document is for programs, not the terminal
                assert len(line.rstrip()) <= 80, f"{label}: wider than 80 columns:\n{cap.out}"
        ran.append(label)
    return ran


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_documented_commands_fit_80_columns(doc, tmp_path, monkeypatch, capsys):
    ran = _run_doc(doc, tmp_path, monkeypatch, capsys, include_full=False)
    if doc.name == "tutorial.md" or "calibrate" in doc.name:
        assert ran, f"no command of {doc.name} ran"


@pytest.mark.slow
@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_documented_full_size_commands_fit_80_columns(doc, tmp_path, monkeypatch, capsys, request):
    # every document's full-size searches take minutes: only where the run asks for slow tests
    if "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("full-size searches of the documents: run with -m slow")
    _run_doc(doc, tmp_path, monkeypatch, capsys, include_full=True)


def test_the_doc_reader_finds_files_and_commands():
    slo = ROOT / "docs" / "howto" / "custom-slos.md"
    assert "slo.toml" in toml_files(slo)
    assert ["pareto", "result.json"] in [
        a for a, _t in steps(ROOT / "docs" / "howto" / "plot-pareto-fronts.md")
    ]
    assert (["search", "--json"], "result.json") in steps(ROOT / "docs" / "howto" / "plot-pareto-fronts.md")
    assert left_out(["search", "--backend", "dask", "--scheduler", "tcp://HOST:8786"])
    assert full_size(["search", "--design", "splitwise-hh", "--export-plan", "hh.yaml"])
    assert not full_size(["search", "--rate", "20", "--duration", "30", "--max-machines", "10"])
