"""`splitplan simulate`: one configuration, nine SLOs, pass/fail."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from splitplan.cli._common import (
    ConfigOpt,
    DurationOpt,
    ExportPlanOpt,
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
from splitplan.sim import SimEngine


def simulate_command(
    ctx: typer.Context,
    design: Annotated[str | None, typer.Option(help="Design name (see `splitplan catalog`).")] = None,
    prompt: Annotated[int | None, typer.Option("--prompt", help="Prompt machines (split designs).")] = None,
    token: Annotated[int | None, typer.Option("--token", help="Token machines (Splitwise designs).")] = None,
    machines: Annotated[int | None, typer.Option(help="Machines of a baseline design.")] = None,
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
        SimEngine, typer.Option(help="The discrete-event simulator or the analytic evaluator.")
    ] = SimEngine.DES,
    chunk_tokens: Annotated[
        int | None,
        typer.Option(help="Chunked-prefill designs: tokens per iteration (default 512, or the config's)."),
    ] = None,
    seed: SeedOpt = 0,
    requests_out: Annotated[Path | None, typer.Option(help="Write per-request results (parquet).")] = None,
    max_memory: MaxMemoryOpt = None,
    json_out: JsonOpt = False,
    export_plan: ExportPlanOpt = None,
) -> None:
    """Simulate one cluster configuration and check all nine SLOs."""
    from splitplan import api
    from splitplan.api._memory import check_requests_memory, expected_requests, parse_memory
    from splitplan.api._plan import check_plan_path
    from splitplan.api._simulate import make_config, requests_table, resolve_design
    from splitplan.cli._common import (
        check_outputs,
        given,
        print_json,
        refuse_unused_seed,
        refuse_with_trace,
        scenario_of_options,
    )
    from splitplan.design import BatchPolicy
    from splitplan.errors import InputError

    check_plan_path(export_plan)

    check_outputs(("--requests-out", requests_out, (".parquet",)))
    if requests_out is not None and engine != "des":
        raise InputError(
            "--requests-out needs --engine des (the analytic engine keeps no per-request results)"
        )
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
    cfg = make_config(d, prompt, token, machines)
    if chunk_tokens is not None and d.policy is not BatchPolicy.CHUNKED:
        raise InputError(f"--chunk-tokens applies to chunked-prefill designs (chunked-a100, …), not {d.name}")
    des_jobs = int(engine == "des")
    n = expected_requests(rate, duration) if trace is None else None
    check_requests_memory(n, budget, "simulating", replayed=False, des_jobs=des_jobs)
    from splitplan.cli._progress import StepProgress

    # one run reports no steps of its own: the bar shows what is happening and the time it takes
    # (a first run also loads or compiles the simulator)
    with StepProgress("simulate") as bar:
        bar.describe("workload")
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
            chunk_tokens=chunk_tokens,
            memory_budget=budget,
            what="simulating",
            des_jobs=des_jobs,
        )
        refuse_unused_seed(ctx, trace, scenario, engine)
        bar.describe(f"{engine}, {scenario.workload.n:,} requests on {cfg.label}")
        result = api.simulate(cfg, scenario, engine)
    if requests_out is not None:
        import pyarrow.parquet as pq

        from splitplan._io import write_with

        table = requests_table(result, scenario)
        write_with(requests_out, lambda tmp: pq.write_table(table, tmp))
    if export_plan is not None:
        import logging

        from splitplan.api._plan import export_plan as write_plan
        from splitplan.api._plan import simulation_plan

        write_plan(simulation_plan(result, scenario), export_plan)
        if not result.meets_slo:
            logging.getLogger("splitplan.cli").warning(
                f"{export_plan} plans a configuration that misses the SLOs"
            )
    from splitplan.api._plan import simulation_metrics

    metrics = simulation_metrics(result, scenario)
    if json_out:
        print_json({**result.to_json(), "metrics": metrics})
        return
    _render(result, scenario.slo)
    from splitplan.cli._common import console
    from splitplan.report.metrics import metrics_line

    console().print(metrics_line(metrics))


def _render(result, slo) -> None:
    from splitplan.cli._common import console, wide
    from splitplan.report.render import make_table
    from splitplan.slo import SLO_KEYS, headroom

    cfg = result.config
    con = console()
    rows = []
    for k in SLO_KEYS:
        v, lat = result.slowdown[k], result.latency_s[k]
        lat_ok = k not in slo.latency_s or headroom(slo.latency_s[k], lat) >= 0
        ok = headroom(slo.slowdown[k], v) >= 0 and lat_ok
        mark = "[green]pass[/green]" if ok else "[red]FAIL[/red]"
        if result.verdict.binding in (k, f"{k}_latency"):
            mark += " (binding)"
        limit = f"{slo.slowdown[k]:g}" + (f" / {slo.latency_s[k]:g} s" if k in slo.latency_s else "")
        rows.append([k, f"{v:.3f}", limit, f"{lat:.4f}", mark])
    title = f"{cfg.label} — {result.engine}, {result.completed}/{result.requests} requests"
    cols = ["SLO", "slowdown", "limit", "latency s", "status"]
    con.print(make_table(title, cols, rows, right_from=1, no_wrap=tuple(range(len(cols))), wide=wide()))
    verdict = "[green]meets all SLOs[/green]" if result.meets_slo else "[red]does not meet the SLOs[/red]"
    if not result.stable:
        verdict += " [red](unstable: queues grow without bound)[/red]"
    util = ", ".join(f"{k} {v:.0%}" for k, v in result.utilization.items())
    con.print(f"{verdict}; binding {result.verdict.binding} (headroom {result.verdict.headroom:+.1%})")
    con.print(
        f"cost ${cfg.cost_usd_per_h:,.2f}/h, power {cfg.power_kw:,.2f} kW, "
        f"throughput {_rate(result.throughput_rps)}, utilization {util}, "
        f"simulated in {_wall(result.sim_wall_s)}"
    )


def _wall(seconds: float) -> str:
    """Three significant figures: the compiled DES runs a small case in well under a millisecond,
    which a whole-millisecond figure printed as `0 ms`."""
    return f"{seconds:.3g} s" if seconds >= 1 else f"{seconds * 1000:.3g} ms"


def _rate(rps: float) -> str:
    import math

    return f"{rps:.2f} req/s" if math.isfinite(rps) else "undefined (every request arrives at once)"


def register(app: typer.Typer) -> None:
    from splitplan.cli._slo_flags import with_slo_flags

    app.command("simulate")(with_slo_flags(simulate_command))
