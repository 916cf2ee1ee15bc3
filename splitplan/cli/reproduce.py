"""`splitplan reproduce`: the paper's comparisons beside splitplan's numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def reproduce_command(
    out: Annotated[Path, typer.Option("--out", help="Folder for report.md, report.json and plots.")] = Path(
        "reproduce-report"
    ),
    quick: Annotated[bool, typer.Option(help="Reduced run: BLOOM-176B, Fig. 12 and Fig. 18, 60 s.")] = False,
    model: Annotated[list[str] | None, typer.Option(help="Model (repeatable).")] = None,
    assumptions: Annotated[
        list[str] | None,
        typer.Option(help="compat (the reference simulator's) and/or splitplan (ours); default both."),
    ] = None,
    duration: Annotated[float, typer.Option(help="Workload duration, s.")] = 120.0,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    jobs: Annotated[int, typer.Option(help="Parallel worker processes.")] = 1,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Re-derive the Splitwise paper's evaluation and print it beside the paper's figures."""
    import sys

    from splitplan import api
    from splitplan.cli._common import print_json

    req = api.ReproduceRequest(
        out_dir=out,
        quick=quick,
        models=tuple(model or ("bloom-176b", "llama2-70b")),
        assumptions=tuple(assumptions or ("compat", "splitplan")),
        duration_s=duration,
        seed=seed,
        jobs=jobs,
    )
    report = api.reproduce(req, progress=lambda msg: print(f"… {msg}", file=sys.stderr))
    if json_out:
        print_json(report.to_json())
        return
    from rich.table import Table

    from splitplan.cli._common import console

    con = console()
    tables: dict[str, Table] = {}
    for c in report.comparisons:
        if c.section not in tables:
            tables[c.section] = t = Table(title=c.section, title_justify="left")
            for col in ("item", "model", "assumptions", "splitplan", "paper", "ratio", "direction"):
                t.add_column(col, justify="left" if col in ("item", "model", "assumptions") else "right")
        tables[c.section].add_row(
            c.item,
            c.model,
            c.assumptions,
            "—" if c.ours is None else f"{c.ours:.4g}",
            "—" if c.paper is None else f"{c.paper:.4g}",
            "—" if c.ratio is None else f"{c.ratio:.2f}",
            {True: "same", False: "[red]differs[/red]", None: ""}[c.direction_ok],
        )
    for t in tables.values():
        con.print(t)
    for n in report.notes:
        con.print(f"note: {n}")
    con.print(f"wrote {', '.join(report.files)}")


def register(app: typer.Typer) -> None:
    app.command("reproduce")(reproduce_command)
