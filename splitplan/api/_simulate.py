"""`splitplan simulate` as a library function, and the scenario builder every command shares."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from splitplan.catalog import get_model
from splitplan.design import ClusterConfig, Design, custom_design, get_design
from splitplan.errors import InputError
from splitplan.perf import resolve_perf
from splitplan.perf.stacks import DEFAULT_STACK
from splitplan.sim import Scenario, SimResult
from splitplan.sim import simulate as _simulate
from splitplan.sim.config import config_perf, load_config
from splitplan.slo import SloSpec, load_slo


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadRequest:
    """Where requests come from: a preset or trace (`workload`), or a replayed `trace` file."""

    workload: str = "coding"
    rate_rps: float | None = 70.0
    duration_s: float | None = 120.0
    trace: str | None = None
    arrival: str = "poisson"
    cv: float = 1.0


def build_scenario(
    *,
    workload: WorkloadRequest | None = None,
    model: str = "llama2-70b",
    perf: str | None = None,
    config: str | Path | None = None,
    slo: SloSpec | str | Path | None = None,
    seed: int = 0,
    chunk_tokens: int | None = None,
) -> Scenario:
    """Resolve names and files into a Scenario (validated here, at the boundary).

    `chunk_tokens` overrides the configuration's chunked-prefill budget (`--chunk-tokens`).
    """
    from splitplan.workload import make_workload, read_trace

    wr = workload or WorkloadRequest()
    sim = load_config(config, **({} if chunk_tokens is None else {"chunk_tokens": chunk_tokens}))
    perf_source = perf or config_perf(config) or DEFAULT_STACK
    resolve_perf(perf_source)  # a clear error now for an unknown name or a missing file
    if wr.trace is not None:
        wl = read_trace(wr.trace)
    else:
        for name, value in (("rate", wr.rate_rps), ("duration", wr.duration_s)):
            if value is not None and not (math.isfinite(value) and value > 0):
                raise InputError(f"--{name} must be a positive number, got {value}")
        wl = make_workload(
            wr.workload,
            rate_rps=wr.rate_rps,
            duration_s=wr.duration_s,
            arrival=wr.arrival,
            cv=wr.cv,
            seed=seed,
        )
    return Scenario(
        workload=wl, model=get_model(model), perf=perf_source, sim=sim, slo=load_slo(slo), seed=seed
    )


def resolve_design(
    name: str | None,
    *,
    prompt_gpu: str | None = None,
    token_gpu: str | None = None,
    prompt_power_cap: float = 1.0,
    token_power_cap: float = 1.0,
    prompt_tp: int | None = None,
    token_tp: int | None = None,
    prompt_precision: str | None = None,
    token_precision: str | None = None,
    prompt_kv_precision: str | None = None,
    token_kv_precision: str | None = None,
) -> Design:
    """A paper design by name, or a custom one from pool GPUs, caps and instances (TP, weight and
    KV precision). Instance options on a named design keep its GPUs and caps."""
    prompt_inst = (prompt_tp, prompt_precision, prompt_kv_precision)
    token_inst = (token_tp, token_precision, token_kv_precision)
    instances = any(x is not None for x in prompt_inst + token_inst)
    if prompt_gpu is None and token_gpu is None and not instances:
        return get_design(name or "splitwise-hh")
    if prompt_gpu is None and token_gpu is not None:
        raise InputError("a custom design needs --prompt-gpu (and optionally --token-gpu)")
    baseline = name is not None and name.lower().startswith("baseline")
    if prompt_gpu is None:  # instance options on a paper design: its pools' GPUs and caps
        paper = get_design(name or "splitwise-hh")
        prompt_gpu, token_gpu = paper.prompt.type.name, paper.token.type.name
        baseline = paper.is_baseline
        if prompt_power_cap == 1.0:
            prompt_power_cap = paper.prompt.power_cap
        if token_power_cap == 1.0:
            token_power_cap = paper.token.power_cap
    if baseline and any(x is not None for x in token_inst):
        raise InputError(
            "a baseline has one pool: give its instance with --prompt-tp/--prompt-precision/"
            "--prompt-kv-precision (the --token-* instance options are for Splitwise designs)"
        )
    return custom_design(
        prompt_gpu,
        token_gpu,
        prompt_power_cap,
        token_power_cap,
        baseline=baseline,
        prompt_tp=prompt_tp,
        token_tp=token_tp,
        prompt_precision=prompt_precision or "fp16",
        token_precision=token_precision or "fp16",
        prompt_kv_precision=prompt_kv_precision,
        token_kv_precision=token_kv_precision,
    )


def make_config(design: Design, prompt: int | None, token: int | None, machines: int | None) -> ClusterConfig:
    if design.is_baseline:
        if machines is None:
            raise InputError(f"{design.name} is a baseline: give its size with --machines N")
        return ClusterConfig.baseline(design, machines)
    if prompt is None or token is None:
        raise InputError(f"{design.name} needs --prompt P and --token T")
    return ClusterConfig(design=design, prompt_machines=prompt, token_machines=token)


def simulate(config: ClusterConfig, scenario: Scenario, engine: str = "des") -> SimResult:
    """Simulate one configuration (the library twin of `splitplan simulate`)."""
    return _simulate(config, scenario, engine)


def requests_table(result: SimResult, scenario: Scenario | None = None):  # -> pyarrow.Table
    """Per-request results as a pyarrow table (report.output_schema: columns named with units)."""
    from splitplan.report.output_schema import build_table

    if result.per_request is None:
        raise InputError(f"the {result.engine} engine keeps no per-request results; use --engine des")
    legacy = {"splitplan.config": result.config.label, "splitplan.engine": result.engine}
    context: dict[str, object] = {
        "design": result.config.design.name,
        "configuration": result.config.label,
        "prompt_machine_type": result.config.design.prompt.name,
        "token_machine_type": result.config.design.token.name,
        "engine": result.engine,
    }
    if scenario is not None:
        wl = scenario.workload
        context.update(
            workload=wl.name,
            workload_meta=dict(wl.meta),
            requests=wl.n,
            duration_s=wl.duration_s,
            model=scenario.model.name,
            seed=scenario.seed,
            slo={"slowdown": dict(scenario.slo.slowdown), "latency_s": dict(scenario.slo.latency_s)},
        )
    return build_table(
        "requests", result.per_request.columns(), command="simulate", context=context, legacy=legacy
    )
