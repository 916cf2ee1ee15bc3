"""`splitplan trace generate|stats|convert`."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

trace_app = typer.Typer(
    name="trace",
    help="Generate, inspect and convert request traces.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]
SkipOpt = Annotated[
    bool,
    typer.Option(
        "--skip-bad-rows", help="Drop malformed rows (each is listed on stderr) instead of failing."
    ),
]


def _report_skipped(stats) -> None:  # stats: api.TraceStats
    for bad in stats.bad_rows:
        print(f"splitplan: skipped {bad}", file=sys.stderr)
    if stats.bad_rows:
        print(f"splitplan: skipped {stats.skipped_rows} bad rows", file=sys.stderr)


def _render(stats, title: str) -> None:
    from splitplan.cli._common import console, wide
    from splitplan.report.render import make_table

    con = console()
    rate = f"{stats.rate_rps:.3f}" if stats.rate_rps != float("inf") else "∞"
    cv = f"{stats.interarrival_cv:.3f}" if stats.interarrival_cv is not None else "–"
    rho = f"{stats.prompt_output_spearman:.3f}" if stats.prompt_output_spearman is not None else "–"
    cols = ["requests", "duration s", "rate req/s", "gap CV", "prompt/output rank corr."]
    row = [f"{stats.requests:,}", f"{stats.duration_s:.3f}", rate, cv, rho]
    con.print(make_table(title, cols, [row], right_from=0, no_wrap=tuple(range(len(cols))), wide=wide()))
    rows = [
        [label, str(col.min), f"{col.mean:.1f}", *(f"{v:g}" for v in col.quantiles.values()), str(col.max)]
        for label, col in (("prompt", stats.prompt_tokens), ("output", stats.output_tokens))
    ]
    cols = ["column", "min", "mean", "p50", "p90", "p99", "max"]
    con.print(
        make_table("Token counts", cols, rows, right_from=1, no_wrap=tuple(range(len(cols))), wide=wide())
    )


@trace_app.command("generate")
def generate_command(
    out: Annotated[str, typer.Option("--out", help="Output CSV (reference simulator format).")],
    workload: Annotated[
        str,
        typer.Option(
            "--workload",
            help="Preset (coding, conversation) or a trace file (Azure, BurstGPT, Mooncake or reference "
            "format).",
        ),
    ] = "coding",
    rate: Annotated[float | None, typer.Option("--rate", help="Mean arrival rate, requests/s.")] = None,
    duration: Annotated[float | None, typer.Option("--duration", help="Trace length, seconds.")] = None,
    requests: Annotated[int | None, typer.Option("--requests", help="Stop after this many requests.")] = None,
    arrival: Annotated[
        str,
        typer.Option(
            "--arrival", help="poisson, gamma (bursty, see --cv) or replay (a trace's own timestamps)."
        ),
    ] = "poisson",
    cv: Annotated[float, typer.Option("--cv", help="Coefficient of variation of gamma gaps.")] = 1.0,
    seed: Annotated[int, typer.Option("--seed", help="Random seed (same seed, same trace).")] = 0,
    recipe: Annotated[
        str | None,
        typer.Option(
            "--recipe",
            help="splitwise-sim: the reference simulator's own generator (--workload = Azure CSV).",
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Generate a trace from a preset or a trace file and write it in the reference simulator's format."""
    from splitplan import api
    from splitplan.cli._common import print_json

    res = api.trace_generate(
        workload,
        out,
        rate_rps=rate,
        duration_s=duration,
        requests=requests,
        arrival=arrival,
        cv=cv,
        seed=seed,
        recipe=recipe,
    )
    if json_out:
        print_json(res.to_json())
        return
    _render(res.stats, f"{res.stats.name} → {res.path}")


@trace_app.command("stats")
def stats_command(
    file: Annotated[str, typer.Argument(help="Trace file (Azure, BurstGPT, Mooncake or reference format).")],
    skip_bad_rows: SkipOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Request count, span, rate and size quantiles of a trace."""
    from splitplan import api
    from splitplan.cli._common import print_json

    stats = api.trace_stats(file, skip_bad_rows=skip_bad_rows)
    _report_skipped(stats)
    if json_out:
        print_json(stats.to_json())
        return
    _render(stats, stats.name)


@trace_app.command("convert")
def convert_command(
    src: Annotated[
        str, typer.Argument(metavar="IN", help="Trace file (Azure, BurstGPT, Mooncake or reference format).")
    ],
    out: Annotated[str, typer.Argument(metavar="OUT", help="Output CSV (reference simulator format).")],
    skip_bad_rows: SkipOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Rewrite a trace in the reference simulator's format."""
    from splitplan import api
    from splitplan.cli._common import print_json

    res = api.trace_convert(src, out, skip_bad_rows=skip_bad_rows)
    _report_skipped(res.stats)
    if json_out:
        print_json(res.to_json())
        return
    _render(res.stats, f"{res.stats.name} → {res.path}")


def register(app: typer.Typer) -> None:
    app.add_typer(trace_app, name="trace")
