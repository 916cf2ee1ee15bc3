"""`splitplan pareto`: the cost–power and cost–throughput fronts of all designs, with each
objective's optimum, from a search's output or from a search run now."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from splitplan.search.objective import Engine, NamedBudget, Objective


def pareto_command(
    source: Annotated[
        Path | None,
        typer.Argument(
            help="A search's --out parquet (every point) or --json document (bests only). "
            "Omitted: run the search given by the options below."
        ),
    ] = None,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write the two-panel figure (.png, .svg or .pdf).")
    ] = None,
    dpi: Annotated[
        int | None, typer.Option("--dpi", help="Resolution of a PNG --plot (default 150).")
    ] = None,
    design: Annotated[
        list[str] | None,
        typer.Option("--design", metavar="DESIGN", help="Search: design (repeatable). Default: all eight."),
    ] = None,
    workload: Annotated[str | None, typer.Option(help="Search: coding, conversation or a trace CSV.")] = None,
    rate: Annotated[float | None, typer.Option(help="Search: target request rate, req/s (70).")] = None,
    duration: Annotated[float | None, typer.Option(help="Search: workload duration, s (120).")] = None,
    model: Annotated[str | None, typer.Option(help="Search: model name (llama2-70b).")] = None,
    objective: Annotated[Objective | None, typer.Option(help="Search: what to optimize (cost).")] = None,
    budget: Annotated[
        NamedBudget | None, typer.Option(help="Search: a named budget.", case_sensitive=False)
    ] = None,
    max_machines: Annotated[int | None, typer.Option(help="Search: cap on machines per pool.")] = None,
    engine: Annotated[Engine | None, typer.Option(help="Search: how points are decided (hybrid).")] = None,
    seed: Annotated[int | None, typer.Option(help="Search: random seed (0).")] = None,
    jobs: Annotated[int | None, typer.Option(help="Search: parallel worker processes (1).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Draw the cost–power and cost–throughput Pareto fronts of all designs, optima marked."""
    from splitplan import api
    from splitplan.cli._common import check_outputs, print_json
    from splitplan.cli._parse import library_errors_as_flags
    from splitplan.errors import InputError
    from splitplan.report.pareto import plot_pareto
    from splitplan.report.plot import check_plot_dpi
    from splitplan.search import Engine, Objective
    from splitplan.search.objective import parse_enum

    check_outputs(("--plot", plot, (".png", ".svg", ".pdf")))
    check_plot_dpi(dpi, plot)
    search_opts = {
        "--design": design,
        "--workload": workload,
        "--rate": rate,
        "--duration": duration,
        "--model": model,
        "--objective": objective,
        "--budget": budget,
        "--max-machines": max_machines,
        "--engine": engine,
        "--seed": seed,
        "--jobs": jobs,
    }
    given = [k for k, v in search_opts.items() if v not in (None, [])]
    if source is not None:
        if given:
            raise InputError(
                f"search options ({', '.join(given)}) apply only to a search run now, "
                "not to a search output file"
            )
        with library_errors_as_flags():
            fronts = api.pareto(source)
        where = source.name
    else:
        # an option not given takes the search's default; one given (0 included) goes to the
        # request as typed, so its checks refuse `--jobs 0` or `--rate 0` as `search` does
        def value(given_value: Any, default: Any) -> Any:
            return default if given_value is None else given_value

        with library_errors_as_flags():
            req = api.SearchRequest(
                designs=tuple(design or ()),
                workload=api.WorkloadRequest(
                    workload=value(workload, "coding"),
                    rate_rps=value(rate, 70.0),
                    duration_s=value(duration, 120.0),
                ),
                model=value(model, "llama2-70b"),
                objective=parse_enum(Objective, value(objective, "cost"), "--objective"),
                budget=budget,
                max_machines=max_machines,
                engine=parse_enum(Engine, value(engine, "hybrid"), "--engine"),
                seed=value(seed, 0),
                jobs=value(jobs, 1),
            )
            from splitplan.cli._progress import StepProgress

            with StepProgress("pareto") as bar:
                bar.describe(f"searching {len(req.designs) or 'all'} design(s), DES runs")
                fronts = api.pareto(req, progress=bar if bar.visible else None)
        where = f"{req.workload.workload} at {req.workload.rate_rps:g} req/s, {req.model}"
    if plot is not None:
        plot_pareto(plot, fronts, title=f"Pareto fronts across designs — {where}", dpi=dpi)
    if json_out:
        doc = fronts.to_json()
        doc["plot"] = None if plot is None else str(plot)
        print_json(doc)
        return
    _render(fronts, plot)


def _render(fronts: Any, plot: Path | None) -> None:
    from splitplan.cli._common import console
    from splitplan.report.pareto import config_label
    from splitplan.report.render import fmt, make_table

    con = console()
    if not fronts.candidates:
        con.print("[red]no configuration meets all nine SLOs: no front[/red]")
        return
    on_power = {id(c) for c in fronts.cost_power}
    on_tput = {id(c) for c in fronts.cost_throughput}
    optimum = {id(c): name for name, c in fronts.optima.items() if c is not None}
    rows = []
    for c in fronts.candidates:
        if id(c) not in on_power and id(c) not in on_tput:
            continue
        marks = [n for n, o in fronts.optima.items() if o is c]
        front = "+".join(x for x, on in (("power", id(c) in on_power), ("tput", id(c) in on_tput)) if on)
        rows.append(
            [
                config_label(c),
                fmt(c["cost_usd_per_h"], ",.0f"),
                fmt(c["power_kw"], ".1f"),
                fmt(c["rate_rps"], ".1f"),
                front,
                ",".join(marks) if id(c) in optimum else "",
            ]
        )
    title = (
        f"Pareto fronts: {len(fronts.candidates)} feasible configuration{'s' * (len(fronts.candidates) != 1)}"
        f" of {len(fronts.designs)} design{'s' * (len(fronts.designs) != 1)}"
    )
    cols = ["configuration", "$/h", "kW", "req/s", "front", "optimum"]
    con.print(make_table(title, cols, rows, right_from=1, no_wrap=(0,)))
    if plot is not None:
        con.print(f"figure written to {plot}")


def register(app: typer.Typer) -> None:
    app.command("pareto")(pareto_command)
