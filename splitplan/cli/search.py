"""`splitplan search`: the best configuration of each design meeting all nine SLOs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from splitplan.cli._common import ExportPlanOpt, interrupted
from splitplan.search.objective import Engine, Method, NamedBudget, Objective
from splitplan.search.parallel import Backend


def search_command(
    ctx: typer.Context,
    design: Annotated[
        list[str] | None,
        typer.Option(
            "--design",
            metavar="DESIGN",
            help="Design to search (repeatable): baseline-a100, baseline-h100, splitwise-aa, "
            "splitwise-hh, splitwise-ha, splitwise-hhcap, chunked-a100, chunked-h100. Default: all eight.",
        ),
    ] = None,
    prompt_gpu: Annotated[
        list[str] | None,
        typer.Option(
            "--prompt-gpu",
            metavar="GPU",
            help="Custom design: prompt-pool GPU/machine (repeat to search over types).",
        ),
    ] = None,
    token_gpu: Annotated[
        list[str] | None,
        typer.Option(
            "--token-gpu", metavar="GPU", help="Custom design: token-pool GPU/machine (repeatable)."
        ),
    ] = None,
    prompt_power_cap: Annotated[str, typer.Option(help="Prompt-pool cap: 0.7, or LO:HI to search.")] = "1.0",
    token_power_cap: Annotated[str, typer.Option(help="Token-pool cap: 0.7, or LO:HI to search.")] = "1.0",
    prompt_tp: Annotated[
        str | None,
        typer.Option(
            help="Prompt-pool tensor parallelism: 8, or a list 2,4,8 to search (default: the node)."
        ),
    ] = None,
    token_tp: Annotated[
        str | None, typer.Option(help="Token-pool tensor parallelism: a value or a list.")
    ] = None,
    prompt_precision: Annotated[
        str | None,
        typer.Option(help="Prompt-pool weight precision(s): fp16, bf16, fp8, int4 (default fp16)."),
    ] = None,
    token_precision: Annotated[str | None, typer.Option(help="Token-pool weight precision(s).")] = None,
    prompt_kv_precision: Annotated[
        str | None, typer.Option(help="Prompt-pool KV-cache precision(s) (default: the weights').")
    ] = None,
    token_kv_precision: Annotated[str | None, typer.Option(help="Token-pool KV-cache precision(s).")] = None,
    prompt_range: Annotated[
        str | None, typer.Option(help="Prompt instances A:B (baseline: N); of the smallest TP when several.")
    ] = None,
    token_range: Annotated[str | None, typer.Option(help="Token machines A:B.")] = None,
    workload: Annotated[str, typer.Option(help="coding, conversation or a trace CSV.")] = "coding",
    rate: Annotated[float, typer.Option(help="Target request rate, req/s.")] = 70.0,
    duration: Annotated[float, typer.Option(help="Workload duration, s.")] = 120.0,
    model: Annotated[str, typer.Option(help="Model name.")] = "llama2-70b",
    objective: Annotated[
        Objective, typer.Option(help="What to minimize (throughput: maximize).")
    ] = Objective.COST,
    power_budget_kw: Annotated[float | None, typer.Option(help="Provisioned power budget, kW.")] = None,
    cost_budget_usd_per_h: Annotated[float | None, typer.Option(help="Cost budget, $/h.")] = None,
    budget: Annotated[
        NamedBudget | None, typer.Option(help="The power or the cost of 40 DGX-H100.", case_sensitive=False)
    ] = None,
    max_machines: Annotated[
        int | None,
        typer.Option(
            help="Top of every pool's count range (raises or lowers it). Default: sized from the load."
        ),
    ] = None,
    engine: Annotated[
        Engine,
        typer.Option(help="hybrid: screen, then the DES decides; analytic: screen only; des: exhaustive."),
    ] = Engine.HYBRID,
    method: Annotated[
        Method, typer.Option(help="auto: grid up to two dimensions, else optuna.")
    ] = Method.AUTO,
    trials: Annotated[int, typer.Option(help="Optuna trials per design.")] = 200,
    band: Annotated[float, typer.Option(help="Hybrid: analytic-margin band re-checked with the DES.")] = 0.3,
    slo: Annotated[Path | None, typer.Option(help="SLO limits (TOML).")] = None,
    perf: Annotated[
        str | None, typer.Option(help="analytic, a stack name (splitplan perf), a stack file or a CSV.")
    ] = None,
    config: Annotated[Path | None, typer.Option(help="Simulator assumptions (TOML).")] = None,
    chunk_tokens: Annotated[
        int | None,
        typer.Option(help="Chunked-prefill designs: tokens per iteration (default 512, or the config's)."),
    ] = None,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    jobs: Annotated[int, typer.Option(help="Parallel worker processes.")] = 1,
    backend: Annotated[
        Backend, typer.Option(help="Local processes (loky) or a Dask cluster.")
    ] = Backend.LOKY,
    scheduler: Annotated[str | None, typer.Option(help="Dask scheduler address.")] = None,
    storage: Annotated[
        str | None,
        typer.Option(
            help="Keep finished work here so reruns resume: an Optuna storage URL (sqlite:///PATH, "
            "postgresql://…), a SQLite file path, or a journal file (PATH.log)."
        ),
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Write every evaluated point (parquet).")] = None,
    max_memory: Annotated[
        str | None,
        typer.Option(
            "--max-memory",
            help="Refuse runs whose estimated peak memory exceeds this (e.g. 4GB); default half the RAM.",
        ),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    export_plan: ExportPlanOpt = None,
    save_request: Annotated[
        Path | None,
        typer.Option(
            "--save-request", help="Write this search's full request (TOML) to replay with --request."
        ),
    ] = None,
    request: Annotated[
        Path | None,
        typer.Option(
            "--request", help="Replay a search saved with --save-request (same inputs, same result)."
        ),
    ] = None,
) -> None:
    """Find the best configuration of each design that meets all nine SLOs."""
    from splitplan import api
    from splitplan._io import partial_path
    from splitplan.api._memory import check_memory, estimate_bytes, expected_requests, parse_memory
    from splitplan.api._plan import check_plan_path
    from splitplan.api._request import check_savable
    from splitplan.api._search import build_spaces, uses_trials
    from splitplan.api._simulate import WorkloadRequest
    from splitplan.api._validate import grid_points
    from splitplan.cli._common import check_outputs, console, given, print_json, wide
    from splitplan.cli._parse import (
        library_errors_as_flags,
        parse_cap,
        parse_int_list,
        parse_name_list,
        parse_range,
    )
    from splitplan.errors import InputError, redact
    from splitplan.report.render import search_summary, search_table
    from splitplan.report.tables import points_table, write_parquet_atomic
    from splitplan.search import Engine, Method, Objective, SearchInterrupted
    from splitplan.search.objective import parse_enum

    check_outputs(("--out", out, (".parquet",)))
    if out is not None:
        check_outputs(("--out", partial_path(out), (".parquet",)))
    if storage is not None:
        from splitplan.search.store import storage_url

        storage_url(storage)  # a missing folder is reported now, not after the work
    if scheduler is not None and backend != "dask":
        raise InputError("--scheduler applies only to --backend dask")
    if given(ctx, "trials") and method == "grid":
        raise InputError("--trials applies to Optuna searches, not --method grid")
    if given(ctx, "band") and engine != "hybrid":
        raise InputError("--band applies only to --engine hybrid")
    if budget is not None and (power_budget_kw is not None or cost_budget_usd_per_h is not None):
        raise InputError(
            "--budget names a budget; it cannot be combined with --power-budget-kw/--cost-budget-usd-per-h"
        )
    mem_budget = parse_memory(max_memory)
    from splitplan.cli._request import check_save_path, replay_request

    check_plan_path(export_plan)
    check_save_path(save_request)
    with library_errors_as_flags():
        req = api.SearchRequest(
            designs=tuple(design or ()),
            prompt_gpus=tuple(prompt_gpu or ()),
            token_gpus=tuple(token_gpu or ()),
            prompt_power_cap=parse_cap(prompt_power_cap, "--prompt-power-cap")
            if given(ctx, "prompt_power_cap")
            else None,
            token_power_cap=parse_cap(token_power_cap, "--token-power-cap")
            if given(ctx, "token_power_cap")
            else None,
            prompt_tp=parse_int_list(prompt_tp, "--prompt-tp"),
            token_tp=parse_int_list(token_tp, "--token-tp"),
            prompt_precision=parse_name_list(prompt_precision),
            token_precision=parse_name_list(token_precision),
            prompt_kv_precision=parse_name_list(prompt_kv_precision),
            token_kv_precision=parse_name_list(token_kv_precision),
            prompt_range=None
            if prompt_range is None
            else parse_range(prompt_range, "--prompt-range", single=True),
            token_range=None
            if token_range is None
            else parse_range(token_range, "--token-range", single=True),
            max_machines=max_machines,
            workload=WorkloadRequest(workload=workload, rate_rps=rate, duration_s=duration),
            model=model,
            perf=perf,
            config=config,
            chunk_tokens=chunk_tokens,
            slo=slo,
            objective=parse_enum(Objective, objective, "--objective"),
            power_budget_kw=power_budget_kw,
            cost_budget_usd_per_h=cost_budget_usd_per_h,
            budget=budget,
            engine=parse_enum(Engine, engine, "--engine"),
            method=parse_enum(Method, method, "--method"),
            trials=trials,
            band=band,
            seed=seed,
            jobs=jobs,
            backend=backend,
            scheduler=scheduler,
            storage=storage,
        )
        if request is not None:
            req = replay_request(ctx, req, request)
        spaces = build_spaces(req)  # validates every option before any work
        if save_request is not None:
            check_savable(req)  # before the search: its end would otherwise find it cannot be saved
    if given(ctx, "trials") and not uses_trials(req, spaces):
        raise InputError(
            "--trials applies to Optuna searches; --method auto searches these designs on a grid "
            "(at most two dimensions each), where every point is evaluated"
        )
    n = expected_requests(rate, duration)
    if n is not None:
        des_jobs = 0 if engine == "analytic" else max(1, jobs if jobs > 0 else (os.cpu_count() or 1))
        est = estimate_bytes(
            n,
            des_jobs=des_jobs,
            baseline_screen=engine != "des" and any(s.baseline for s in spaces),
            grid_points=grid_points(spaces),
        )
        check_memory(
            est,
            mem_budget,
            f"searching {len(spaces)} design(s) over {n:,.0f} requests",
            "lower --rate or --duration, or search fewer designs (baselines need the most)",
        )
    storage = req.storage
    from splitplan.cli._progress import StepProgress

    # shown from the start (sampling the workload and the analytic screens take seconds), then
    # the search's DES runs against the total it forecasts at the start, with elapsed time and ETA
    progress = StepProgress("search")
    progress.describe(f"{len(spaces)} design(s), DES runs")
    meta = {
        "objective": req.objective.value,
        "engine": req.engine.value,
        "seed": req.seed,
        "workload": req.workload.workload,
        "rate_rps": req.workload.rate_rps,
    }
    try:
        with library_errors_as_flags():
            outcome = api.search(req, progress=progress if progress.visible else None)
    except SearchInterrupted as exc:
        progress.close()
        if save_request is not None:
            _save_request(req, save_request)
        kept = []
        if out is not None and exc.points:
            part = partial_path(out)
            write_parquet_atomic(points_table(exc.points, partial=True, context=_context(req), **meta), part)
            kept.append(f"{len(exc.points)} evaluated points written to {part}")
        if storage is not None:
            kept.append(f"finished DES runs kept in {redact(storage)}; rerun the same command to resume")
        msg = "; ".join(kept) if kept else "nothing was kept (use --storage to make searches resumable)"
        line = f"splitplan: search interrupted after {exc.des_evaluations} DES runs — {msg}"
        raise interrupted(line) from None
    finally:
        progress.close()
    if save_request is not None:
        _save_request(req, save_request)
    if out is not None:
        write_parquet_atomic(points_table(outcome.points, context=_context(req), **meta), out)
    from splitplan.api._plan import search_metrics

    metrics = search_metrics(req, outcome)
    if json_out:
        print_json(_with_metrics(outcome.to_json(), metrics))
    else:
        from splitplan.report.metrics import metrics_line

        con = console()
        con.print(search_table(outcome, wide=wide()))
        con.print(search_summary(outcome))
        best = None if outcome.best is None else metrics.get(outcome.best.design)
        if best:
            con.print(f"  {metrics_line(best)}")
        if out is not None:
            con.print(f"{outcome.evaluated_points} points written to {out}")
    if export_plan is not None:
        _export_plan(req, outcome, export_plan)


def _context(req: Any) -> dict[str, Any]:
    """The metadata document's context of a search-points file: the whole request."""
    from splitplan.api._request import request_document

    doc = request_document(req, hash_files=False)
    return {"request": doc, "model": req.model, "seed": req.seed, "slo": doc["slo"]}


def _save_request(req: Any, path: Path) -> None:
    from splitplan.api._request import save_request
    from splitplan.cli._logging import note

    save_request(req, path)
    note(f"search request written to {path}; replay with: splitplan search --request {path}")


def _with_metrics(doc: dict[str, Any], metrics: dict[str, Any]) -> dict[str, Any]:
    """Each result (and the best) gains `metrics`: served tokens/s, $/M tokens, J/request."""
    for r in doc["results"]:
        r["metrics"] = metrics.get(r["design"])
    if doc.get("best") is not None:
        doc["best"]["metrics"] = metrics.get(doc["best"]["design"])
    return doc


def _export_plan(req: Any, outcome: Any, path: Path) -> None:
    from splitplan.api._plan import export_plan, search_plan
    from splitplan.cli._logging import note

    export_plan(search_plan(req, outcome), path)  # InfeasibleError: one line, exit 0, no file
    note(f"deployment plan written to {path}")


def register(app: typer.Typer) -> None:
    from splitplan.cli._slo_flags import with_slo_flags

    app.command("search")(with_slo_flags(search_command))
