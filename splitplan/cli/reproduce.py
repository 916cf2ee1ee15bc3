"""`splitplan reproduce`: the paper's comparisons beside splitplan's numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def reproduce_command(
    ctx: typer.Context,
    out: Annotated[str, typer.Option("--out", help="Folder for report.md, report.json and plots.")] = (
        "reproduce-report"
    ),
    quick: Annotated[
        bool, typer.Option(help="Reduced run: one model (BLOOM-176B), Fig. 12 and Fig. 18, 60 s at most.")
    ] = False,
    model: Annotated[list[str] | None, typer.Option(metavar="MODEL", help="Model (repeatable).")] = None,
    assumptions: Annotated[
        list[str] | None,
        typer.Option(
            metavar="<compat|splitplan>",
            help="compat (the reference simulator's) and/or splitplan (ours); repeatable, default both.",
        ),
    ] = None,
    duration: Annotated[float, typer.Option(help="Workload duration, s.")] = 120.0,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    jobs: Annotated[int, typer.Option(help="Parallel worker processes.")] = 1,
    section: Annotated[
        list[str] | None,
        typer.Option(
            metavar="<paper|beyond-paper>",
            help="paper (the paper's comparisons) and/or beyond-paper (split designs against "
            "chunked prefill); repeatable, default both.",
        ),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Re-derive the Splitwise paper's evaluation and print it beside the paper's figures."""
    from splitplan import api
    from splitplan.api._reproduce import QUICK_DURATION_S
    from splitplan.cli._common import given, print_json
    from splitplan.errors import InputError

    if quick and given(ctx, "duration") and duration > QUICK_DURATION_S:
        raise InputError(
            f"--quick runs {QUICK_DURATION_S:g} s at most; give --duration ≤ {QUICK_DURATION_S:g} "
            "or drop --quick"
        )
    if not out:
        raise InputError("--out needs a folder name, got ''")
    if quick and model and len(model) > 1:
        raise InputError(f"--quick runs one model; give one --model (got {len(model)})")
    from splitplan._io import check_output_folder

    check_output_folder(out, "--out")
    req = api.ReproduceRequest(
        out_dir=Path(out),
        quick=quick,
        models=tuple(model or ("bloom-176b", "llama2-70b")),
        assumptions=tuple(assumptions or ("compat", "splitplan")),
        duration_s=duration,
        seed=seed,
        jobs=jobs,
        sections=tuple(section or ("paper", "beyond-paper")),
    )
    from splitplan.api._reproduce import planned_steps
    from splitplan.cli._progress import StepProgress

    with StepProgress("reproduce", notes=True) as bar:
        bar.add(planned_steps(req))
        runs = bar.runs("  this step's DES runs")
        started = [False]

        def step(msg: str) -> None:  # each message starts the next figure step
            if started[0]:
                bar.advance(1)
            started[0] = True
            bar.describe(msg)
            if runs is not None:
                runs.restart()

        report = api.reproduce(req, progress=step, runs=runs)
        bar.advance(1)
    if json_out:
        print_json(report.to_json())
        return
    from splitplan.cli._common import console, wide
    from splitplan.report.render import make_table

    con = console()
    sections: dict[str, list[list[str]]] = {}
    for c in report.comparisons:
        sections.setdefault(c.section, []).append(
            [
                c.item,
                c.model,
                c.assumptions,
                "—" if c.ours is None else f"{c.ours:.4g}",
                "—" if c.paper is None else f"{c.paper:.4g}",
                "—" if c.ratio is None else f"{c.ratio:.2f}",
                {True: "same", False: "[red]differs[/red]", None: ""}[c.direction_ok],
            ]
        )
    cols = ["item", "model", "assumptions", "splitplan", "paper", "ratio", "direction"]
    for heading, table_rows in sections.items():
        # item and assumptions wrap; the model, the numbers and the verdict stay whole
        con.print(make_table(heading, cols, table_rows, right_from=3, no_wrap=(1, 3, 4, 5, 6), wide=wide()))
    for n in report.notes:
        con.print(f"note: {n}")
    con.print(f"wrote {', '.join(report.files)}")


def register(app: typer.Typer) -> None:
    app.command("reproduce")(reproduce_command)
