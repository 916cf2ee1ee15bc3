"""`splitplan perf check|fit`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

perf_app = typer.Typer(
    help="Check or calibrate the performance model against a profile or measurement table.",
    no_args_is_help=True,
)


@perf_app.command("check")
def check_command(
    profile: Annotated[
        Path,
        typer.Option(
            "--profile",
            help="Table to score: a SplitwiseSim profile CSV or a measurement CSV "
            "(../shared/reference/gpu-measurements/README.md schema).",
        ),
    ],
    perf: Annotated[
        str,
        typer.Option(
            "--perf",
            help="analytic | profile (80:20 split of a profile table) | a stack name "
            "(kernels, tensorrt-llm, splitwise-sim, datasheet, a user catalog's) | a stack file or CSV.",
        ),
    ] = "analytic",
    tensor_parallel: Annotated[
        int | None,
        typer.Option(
            "--tensor-parallel",
            help="Only rows at this TP (default: 8 for analytic/profile on a profile table, else all).",
        ),
    ] = None,
    source: Annotated[
        str | None, typer.Option("--source", help="Only rows whose source starts with this.")
    ] = None,
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
    """MAPE (percent) of the performance model per (model, hardware, TP, precision, phase) group."""
    from splitplan import api
    from splitplan._io import refuse_url
    from splitplan.cli._common import console, print_json
    from splitplan.errors import InputError

    refuse_url(profile, "--profile")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:  # before the table is read
        raise InputError(f"--seed must be a whole number ≥ 0, got {seed!r}")
    tp = tensor_parallel
    if tp is None and perf in ("analytic", "profile"):
        from splitplan.perf.measurements import read_measurements

        if read_measurements(str(profile)).schema == "profile":
            tp = 8
    from splitplan.cli._parse import library_errors_as_flags

    with library_errors_as_flags():
        result = api.perf_check(
            profile,
            perf=perf,
            tensor_parallel=tp,
            split_seed=seed,
            prompt_curves=prompt_curves,
            source=source,
        )
    if json_out:
        print_json(result.to_json())
        return
    from splitplan.cli._common import wide
    from splitplan.report.render import make_table

    curves = f" ({result.prompt_curves} prompt curves)" if result.prompt_curves else ""
    cols = ["model", "hardware", "TP", "precision", "source", "phase", "MAPE %", "rows"]
    rows = [
        [
            g.model,
            g.hardware,
            str(g.tensor_parallel),
            g.precision,
            g.source,
            g.phase,
            f"{g.mape:.2f}",
            str(g.n),
        ]
        for g in result.groups
    ]
    t = make_table(
        f"{perf} performance model{curves} vs {profile.name}",
        cols,
        rows,
        right_from=6,
        no_wrap=tuple(range(len(cols))),
        left=(),
        wide=wide(),
    )
    con = console()
    con.print(t)
    doc = result.to_json()["overall"]
    assert isinstance(doc, dict)
    parts = [f"{k.removesuffix('_mape')} MAPE {v:.2f} %" for k, v in doc.items() if v is not None]
    con.print("overall: " + ", ".join(parts))
    if result.rows_dropped:
        con.print(f"{result.rows_dropped} row(s) left out: they contradict their own group")


@perf_app.command("fit")
def fit_command(
    profile: Annotated[Path, typer.Option("--profile", help="Profile or measurement CSV to fit to.")],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            help="With --name: a catalog folder (the stack goes to OUT/perf/NAME.toml). "
            "Without: the analytic coefficient file to write (TOML).",
        ),
    ],
    name: Annotated[
        str | None, typer.Option("--name", help="Fit a stack of the physical model under this name.")
    ] = None,
    tensor_parallel: Annotated[
        int | None, typer.Option("--tensor-parallel", help="Fit rows at this TP only (analytic: 8).")
    ] = None,
    source: Annotated[
        str | None, typer.Option("--source", help="Stack: fit rows whose source starts with this.")
    ] = None,
    no_host_overhead: Annotated[
        bool, typer.Option("--no-host-overhead", help="Stack: GPU kernel sums, no host time per iteration.")
    ] = False,
    knee: Annotated[bool, typer.Option("--knee", help="Stack: fit the large-prefill slowdown.")] = False,
    sequence_overhead: Annotated[
        bool, typer.Option("--sequence-overhead", help="Stack: fit a host cost per sequence in the batch.")
    ] = False,
    refine: Annotated[
        bool, typer.Option("--refine", help="Stack: per (GPU, model) refinements of engine terms.")
    ] = False,
    cv: Annotated[
        str | None, typer.Option("--cv", help="'group': also print leave-one-group-out error.")
    ] = None,
    description: Annotated[
        str, typer.Option("--description", help="Stack: one line saying what it is.")
    ] = "",
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Fit a named stack (--name) or the analytic model's coefficients per GPU type, and save it."""
    from splitplan import api
    from splitplan._io import refuse_url
    from splitplan.cli._common import print_json
    from splitplan.errors import InputError

    refuse_url(profile, "--profile")
    stack_only = (source, no_host_overhead, knee, sequence_overhead, refine, cv, description)
    if name is None and any(stack_only):
        raise InputError(
            "--source, --no-host-overhead, --knee, --sequence-overhead, --refine, --cv and --description "
            "need --name"
        )
    from splitplan.cli._parse import library_errors_as_flags

    with library_errors_as_flags():
        result = api.perf_fit(
            profile,
            out,
            # absent: 8 for the analytic fit; given (0 too), the library checks it
            tensor_parallel=tensor_parallel if (name or tensor_parallel is not None) else 8,
            name=name,
            source=source,
            host_overhead=not no_host_overhead,
            knee=knee,
            sequence_overhead=sequence_overhead,
            refine=refine,
            cv=cv,
            description=description,
        )
    if json_out:
        print_json(result.to_json())
        return
    if name is None:
        from splitplan.cli._common import console

        console().print(
            f"wrote {result.out}: GPU types {', '.join(result.gpus)}; "
            f"per-model refinements {', '.join(result.refined_models) or 'none'}",
            markup=False,
            highlight=False,
        )
        return
    typer.echo(f"wrote {result.out}: stack {name}, fitted to {result.rows} rows")
    if result.cv:
        typer.echo("leave-one-group-out (group = model, GPU, TP, precision):")
        for g in result.cv:
            typer.echo(
                f"  {g.model} {g.hardware} TP{g.tensor_parallel} {g.precision} {g.phase}: "
                f"MAPE {g.mape:.1f} % ({g.n} rows)"
            )
        typer.echo("  overall: " + ", ".join(f"{k} {v:.1f} %" for k, v in result.cv_overall.items()))


def register(app: typer.Typer) -> None:
    app.add_typer(perf_app, name="perf")
