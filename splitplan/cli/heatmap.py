"""`splitplan heatmap`: one design over a (prompt, token) grid → parquet and a 3×3 figure."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from splitplan.cli._common import (
    ConfigOpt,
    DurationOpt,
    JsonOpt,
    MaxMemoryOpt,
    ModelOpt,
    PerfOpt,
    PromptCapOpt,
    PromptGpuOpt,
    PromptKvOpt,
    PromptPrecisionOpt,
    PromptTpOpt,
    RateOpt,
    SeedOpt,
    SloOpt,
    TokenCapOpt,
    TokenGpuOpt,
    TokenKvOpt,
    TokenPrecisionOpt,
    TokenTpOpt,
    TraceOpt,
    WorkloadOpt,
)
from splitplan.search.objective import Engine


def heatmap_command(
    ctx: typer.Context,
    design: Annotated[str | None, typer.Option(help="Splitwise design (see `splitplan catalog`).")] = None,
    prompt_range: Annotated[str, typer.Option("--prompt-range", help="Prompt machines A:B.")] = "1:39",
    token_range: Annotated[str, typer.Option("--token-range", help="Token machines C:D.")] = "1:39",
    prompt_gpu: PromptGpuOpt = None,
    token_gpu: TokenGpuOpt = None,
    prompt_power_cap: PromptCapOpt = 1.0,
    token_power_cap: TokenCapOpt = 1.0,
    prompt_tp: PromptTpOpt = None,
    token_tp: TokenTpOpt = None,
    prompt_precision: PromptPrecisionOpt = None,
    token_precision: TokenPrecisionOpt = None,
    prompt_kv_precision: PromptKvOpt = None,
    token_kv_precision: TokenKvOpt = None,
    workload: WorkloadOpt = "coding",
    rate: RateOpt = 70.0,
    duration: DurationOpt = 120.0,
    trace: TraceOpt = None,
    model: ModelOpt = "llama2-70b",
    perf: PerfOpt = None,
    config: ConfigOpt = None,
    slo: SloOpt = None,
    engine: Annotated[
        Engine,
        typer.Option(help="hybrid (the search's answer), des (every point), or analytic (fast, unverified)."),
    ] = Engine.HYBRID,
    sample_size: Annotated[int | None, typer.Option(help="Requests sampled by the analytic engine.")] = None,
    jobs: Annotated[int, typer.Option(help="Parallel DES processes.")] = 1,
    band: Annotated[float, typer.Option(help="Hybrid: analytic-margin band re-checked with the DES.")] = 0.3,
    seed: SeedOpt = 0,
    out: Annotated[Path | None, typer.Option("--out", help="Write one row per point (parquet).")] = None,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write the 3×3 slowdown figure (.png, .svg or .pdf).")
    ] = None,
    dpi: Annotated[
        int | None, typer.Option("--dpi", help="Resolution of a PNG --plot (default 150).")
    ] = None,
    max_memory: MaxMemoryOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Evaluate every (prompt, token) configuration of one design: slowdowns, SLO verdict, optima."""
    from splitplan import api
    from splitplan.api._heatmap import MAX_POINTS
    from splitplan.api._memory import check_requests_memory, expected_requests, parse_memory
    from splitplan.api._simulate import resolve_design
    from splitplan.cli._common import (
        check_outputs,
        given,
        print_json,
        refuse_unused_seed,
        refuse_with_trace,
        scenario_of_options,
    )
    from splitplan.cli._parse import library_errors_as_flags, parse_range
    from splitplan.errors import InputError

    pr = parse_range(prompt_range, "--prompt-range")
    tr = parse_range(token_range, "--token-range")
    from splitplan.report.plot import check_plot_dpi

    check_plot_dpi(dpi, plot)
    points = (pr[1] - pr[0] + 1) * (tr[1] - tr[0] + 1)
    if points > MAX_POINTS:
        raise InputError(f"the grid has {points:,} points; at most {MAX_POINTS:,} are allowed")
    check_outputs(("--out", out, (".parquet",)), ("--plot", plot, (".png", ".svg", ".pdf")))
    if sample_size is not None and engine == "des":
        raise InputError("--sample-size applies to the analytic and hybrid engines, not --engine des")
    if given(ctx, "jobs") and engine == "analytic":
        raise InputError("--jobs runs DES points in parallel; the analytic engine runs none")
    if given(ctx, "band") and engine != "hybrid":
        raise InputError("--band applies to the hybrid engine only")
    refuse_with_trace(ctx, trace)
    budget = parse_memory(max_memory)
    d = resolve_design(
        design,
        prompt_gpu=prompt_gpu,
        token_gpu=token_gpu,
        prompt_power_cap=prompt_power_cap if given(ctx, "prompt_power_cap") else None,
        token_power_cap=token_power_cap if given(ctx, "token_power_cap") else None,
        prompt_tp=prompt_tp,
        token_tp=token_tp,
        prompt_precision=prompt_precision,
        token_precision=token_precision,
        prompt_kv_precision=prompt_kv_precision,
        token_kv_precision=token_kv_precision,
    )
    des_jobs = 0 if engine == "analytic" else max(1, jobs)
    n = expected_requests(rate, duration) if trace is None else None
    check_requests_memory(n, budget, "a heatmap over", replayed=False, des_jobs=des_jobs, grid_points=points)
    from splitplan.cli._progress import StepProgress

    # the bar shows from here: sampling the workload and the analytic screen take seconds too
    with StepProgress(f"heatmap {d.name}") as progress, library_errors_as_flags():
        progress.describe("workload")
        scenario = scenario_of_options(
            workload=workload,
            rate=rate,
            duration=duration,
            trace=trace,
            model=model,
            perf=perf,
            config=config,
            slo=slo,
            seed=seed,
            memory_budget=budget,
            what="a heatmap over",
            des_jobs=des_jobs,
            grid_points=points,
        )
        refuse_unused_seed(ctx, trace, scenario, engine)
        progress.describe(f"{engine}, {points} points")
        result = api.heatmap(
            d, scenario, pr, tr, engine, sample_size=sample_size, jobs=jobs, band=band, progress=progress
        )
    if out is not None:
        result.write_parquet(out)
    if plot is not None:
        result.plot(plot, dpi=dpi)
    if json_out:
        doc = result.to_json()
        doc["out"] = None if out is None else str(out)
        doc["plot"] = None if plot is None else str(plot)
        print_json(doc)
        return
    _render(result, out, plot)


def _render(result, out: Path | None, plot: Path | None) -> None:
    from splitplan.cli._common import console
    from splitplan.search import Engine

    con = console()
    n = len(result.prompt_machines)
    feasible = int(result.meets_slo.sum())
    con.print(
        f"[bold]{result.design.name}[/bold]: {n} configurations "
        f"({result.prompt_values[0]}–{result.prompt_values[-1]} prompt × "
        f"{result.token_values[0]}–{result.token_values[-1]} token), engine {result.engine}"
        + (f" ({result.des_points} decided by the DES)" if result.des_points else "")
        + (" — analytic, unverified" if result.engine is Engine.ANALYTIC else "")
        + f", {result.wall_s:.2f} s"
    )
    if feasible == 0:
        con.print("[red]no configuration in the grid meets all nine SLOs[/red]")
    else:
        con.print(f"{feasible} of {n} meet all nine SLOs")
        for label, pt in (("cost-optimal", result.cost_optimal), ("power-optimal", result.power_optimal)):
            con.print(
                f"  {label}: {pt.prompt_machines} prompt + {pt.token_machines} token, "
                f"${pt.cost_usd_per_h:,.2f}/h, {pt.power_kw:,.2f} kW"
            )
    for label, path in (("table", out), ("figure", plot)):
        if path is not None:
            con.print(f"{label} written to {path}")


def register(app: typer.Typer) -> None:
    from splitplan.cli._slo_flags import with_slo_flags

    app.command("heatmap")(with_slo_flags(heatmap_command))
