"""Generate docs/reference.md from the CLI itself, so the reference cannot drift from the code.

    python docs/gen_reference.py           # rewrite docs/reference.md
    python docs/gen_reference.py --check   # exit 1 if docs/reference.md is stale

Walks the typer app (typer.main.get_command) and the click parameters of every command. Types are
named from the Python annotation when typer keeps it, else from the click type, so the output does
not depend on which typer release renders the help screen.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REFERENCE = HERE / "reference.md"

HEADER = """# Command reference

Generated from the command-line interface by `python docs/gen_reference.py`; do not edit by hand
(a test fails when this file is stale). Every command also accepts `--help`, and every command is a
function of the library (`splitplan.api`). Exit codes: 0 success (including "no configuration meets
the SLOs"), 2 bad input (one line naming the problem), 1 internal error.
"""

_TYPE_NAMES = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "Path": "PATH", "bool": "BOOLEAN"}
_CLICK_NAMES = {
    "text": "TEXT",
    "string": "TEXT",
    "integer": "INTEGER",
    "int": "INTEGER",
    "float": "FLOAT",
    "path": "PATH",
    "boolean": "BOOLEAN",
    "bool": "BOOLEAN",
}


def _type_name(param: Any) -> str:
    """TEXT / INTEGER / FLOAT / PATH / BOOLEAN, the same across typer releases."""
    desc = getattr(param, "type_descriptor", None)
    ann = getattr(desc, "annotation", None)
    if ann is not None:
        args = getattr(ann, "__args__", None)
        if args:  # list[str] and friends: a repeatable option of the element type
            ann = args[0]
        name = getattr(ann, "__name__", str(ann))
        return _TYPE_NAMES.get(name, name.upper())
    ptype = getattr(param, "type", None)
    raw = str(getattr(ptype, "name", "text")).lower()
    return _CLICK_NAMES.get(raw, raw.upper())


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _help_text(cmd: Any) -> str:
    text = (cmd.help or "").replace("\b", "").strip()
    return "\n".join(line.rstrip() for line in text.splitlines())


def _is_flag(param: Any) -> bool:
    return bool(getattr(param, "is_flag", False)) and _type_name(param) == "BOOLEAN"


def _default(param: Any) -> str:
    if getattr(param, "required", False):
        return "required"
    default = param.default
    if _is_flag(param):
        return "off" if not default else "on"
    if default is None or callable(default) or default == () or default == []:
        return ""
    return f"`{default}`"


def _usage(path: list[str], cmd: Any) -> str:
    pieces = ["splitplan", *path]
    if any(_kind(p) == "option" for p in cmd.params):
        pieces.append("[OPTIONS]")
    if getattr(cmd, "commands", None):
        pieces.append("COMMAND [ARGS]...")
    for p in cmd.params:
        if _kind(p) == "argument":
            pieces.append(_metavar(p))
    return " ".join(pieces)


def _kind(param: Any) -> str:
    return "argument" if getattr(param, "param_type_name", "option") == "argument" else "option"


def _metavar(param: Any) -> str:
    return str(param.metavar or param.name.upper())


def _options_table(cmd: Any) -> list[str]:
    rows: list[str] = []
    args = [p for p in cmd.params if _kind(p) == "argument"]
    opts = [p for p in cmd.params if _kind(p) == "option" and not getattr(p, "hidden", False)]
    if args:
        rows += ["| argument | type | description |", "|---|---|---|"]
        for p in args:
            rows.append(f"| `{_metavar(p)}` | {_type_name(p)} | {_cell(getattr(p, 'help', '') or '')} |")
        rows.append("")
    if opts:
        rows += ["| option | type | default | description |", "|---|---|---|---|"]
        for p in opts:
            names = ", ".join(f"`{o}`" for o in [*p.opts, *p.secondary_opts])
            kind = "flag" if _is_flag(p) else _type_name(p)
            if getattr(p, "multiple", False):
                kind += " (repeatable)"
            rows.append(f"| {names} | {kind} | {_default(p)} | {_cell(p.help or '')} |")
        rows.append("")
    return rows


def _walk(path: list[str], cmd: Any, out: list[str]) -> None:
    level = "#" * min(2 + len(path) - 1, 4) if path else "##"
    title = "splitplan " + " ".join(path) if path else "splitplan"
    out += [f"{level} `{title}`", "", f"```text\n{_usage(path, cmd)}\n```", ""]
    help_text = _help_text(cmd)
    if help_text:
        out += [help_text, ""]
    out += _options_table(cmd)
    subs = getattr(cmd, "commands", None) or {}
    if subs and path:
        out += ["Subcommands: " + ", ".join(f"`{name}`" for name in sorted(subs)) + ".", ""]
    for name in sorted(subs):
        sub = subs[name]
        if getattr(sub, "hidden", False):
            continue
        _walk([*path, name], sub, out)


def render() -> str:
    """The whole reference as Markdown (deterministic: commands sorted by name)."""
    from typer.main import get_command

    from splitplan.cli import app

    root = get_command(app)
    lines = [HEADER, "## Commands", ""]
    for name in sorted(root.commands):
        sub = root.commands[name]
        lines.append(f"- [`splitplan {name}`](#splitplan-{name}) — {_cell(_first_line(sub))}")
    lines.append("")
    _walk([], root, lines)
    _output_files(lines)
    return "\n".join(lines).rstrip("\n") + "\n"


_FILES = {
    "search-points": "`search --out FILE.parquet`: one row per evaluated point",
    "heatmap": "`heatmap --out FILE.parquet`: one row per (prompt, token) point",
    "requests": "`simulate --requests-out FILE.parquet`: one row per request (DES)",
}


def _output_files(lines: list[str]) -> None:
    """The parquet files' columns, from splitplan.report.output_schema (the one schema module)."""
    from splitplan.report import output_schema as schema

    lines += [
        "## Output files",
        "",
        f"Every parquet file follows one schema module (`splitplan.report.output_schema`, schema version "
        f"{schema.SCHEMA_VERSION}). Units are in each field's metadata (`unit`) and in the names' "
        "suffixes. Null means not measured or no finite value (never NaN, inf or a sentinel); nullable "
        "integers stay integers (pandas reads them as `Int64`). The metadata is one JSON document under "
        f"the key `{schema.METADATA_KEY}`: `schema_version`, `splitplan_version`, `kind`, `command`, the "
        "scenario (workload, model, SLO limits, seed; a search adds its whole `request`), `stack` "
        "(Python, numpy, pyarrow versions) and `columns` (type and unit of each). Read it with "
        "`splitplan.report.output_schema.read_metadata(path)`.",
        "",
    ]
    for kind in schema.KINDS:
        lines += [f"### {kind}", "", _FILES[kind] + ".", "", "| column | type | unit | description |"]
        lines.append("|---|---|---|---|")
        for c in schema.columns(kind):
            lines.append(f"| `{c.name}` | {c.type} | {_cell(c.unit)} | {_cell(c.description)} |")
        lines.append("")


def _first_line(cmd: Any) -> str:
    text = _help_text(cmd)
    return text.splitlines()[0] if text else ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Generate docs/reference.md from the CLI.")
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/reference.md is stale")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        current = REFERENCE.read_text() if REFERENCE.exists() else ""
        if current != text:
            print("docs/reference.md is stale: run python docs/gen_reference.py", file=sys.stderr)
            return 1
        return 0
    tmp = REFERENCE.with_suffix(".md.tmp")
    tmp.write_text(text)
    tmp.replace(REFERENCE)
    print(f"wrote {REFERENCE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
