"""`splitplan perf check|fit`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

perf_app = typer.Typer(
    help="Check or calibrate the performance model against a profile table.", no_args_is_help=True
)


@perf_app.command("check")
def check_command(
    profile: Annotated[Path, typer.Option("--profile", help="Profile CSV (reference simulator schema).")],
    perf: Annotated[str, typer.Option("--perf", help="analytic | profile (80:20 split).")] = "analytic",
    tensor_parallel: Annotated[int, typer.Option("--tensor-parallel", help="TP rows to check.")] = 8,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the 80:20 split (profile mode).")] = 0,
    prompt_curves: Annotated[
        str,
        typer.Option(
            "--prompt-curves",
            help="Profile mode: by-count (a lone prompt and a batch on their own rows) or pooled "
            "(the reference simulator's single curve).",
        ),
    ] = "by-count",
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """MAPE (percent) of the performance model per (model, hardware, TP, phase) group."""
    from splitplan import api
    from splitplan.cli._common import console, print_json

    result = api.perf_check(
        profile, perf=perf, tensor_parallel=tensor_parallel, split_seed=seed, prompt_curves=prompt_curves
    )
    if json_out:
        print_json(result.to_json())
        return
    from rich.table import Table

    curves = f" ({result.prompt_curves} prompt curves)" if result.prompt_curves else ""
    t = Table(title=f"{perf} performance model{curves} vs {profile.name}")
    for col in ("model", "hardware", "TP", "phase", "MAPE %", "rows"):
        t.add_column(col)
    for g in result.groups:
        t.add_row(g.model, g.hardware, str(g.tensor_parallel), g.phase, f"{g.mape:.2f}", str(g.n))
    con = console()
    con.print(t)
    con.print(f"overall: prompt MAPE {result.prompt_mape:.2f} %, token MAPE {result.token_mape:.2f} %")


@perf_app.command("fit")
def fit_command(
    profile: Annotated[Path, typer.Option("--profile", help="Profile CSV to fit to.")],
    out: Annotated[Path, typer.Option("--out", help="Coefficient file to write (TOML).")],
    tensor_parallel: Annotated[int, typer.Option("--tensor-parallel", help="TP rows to fit.")] = 8,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Calibrate the analytic model's coefficients per GPU type and save them."""
    from splitplan import api
    from splitplan.cli._common import print_json

    result = api.perf_fit(profile, out, tensor_parallel=tensor_parallel)
    if json_out:
        print_json(result.to_json())
        return
    typer.echo(
        f"wrote {result.out}: GPU types {', '.join(result.gpus)}; "
        f"per-model refinements {', '.join(result.refined_models) or 'none'}"
    )


def register(app: typer.Typer) -> None:
    app.add_typer(perf_app, name="perf")
