"""`splitplan simulate` as a library function, and the scenario builder every command shares."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from splitplan._numbers import is_number
from splitplan.catalog import Machine, get_model
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

    def __post_init__(self) -> None:
        """Types at the boundary: a request file's or a caller's "2" for a rate is one line naming
        the field, not a TypeError from the comparison in `build_scenario` (numbers stay numbers:
        a numeric string is refused, not read)."""
        for name in ("workload", "arrival"):
            if not isinstance(getattr(self, name), str):
                raise InputError(f"`{name}` must be a string, got {getattr(self, name)!r}")
        if self.trace is not None and not isinstance(self.trace, str | Path):
            raise InputError(f"`trace` must be a file path, got {self.trace!r}")
        for name in ("rate_rps", "duration_s", "cv"):
            v = getattr(self, name)
            if v is None and name != "cv":
                continue
            if not is_number(v):
                raise InputError(f"`{name}` must be a number, got {v!r}")


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

    wr = WorkloadRequest() if workload is None else workload
    if not isinstance(wr, WorkloadRequest):
        raise InputError(f"`workload` must be a WorkloadRequest, got {wr!r}")
    if not isinstance(model, str):
        raise InputError(f"`model` must be a model name, got {model!r}")
    if config is not None and not isinstance(config, str | Path):
        raise InputError(f"`config` must be a file path, got {config!r}")
    if slo is not None and not isinstance(slo, SloSpec | str | Path):
        raise InputError(f"`slo` must be a SloSpec or an SLO file path, got {slo!r}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise InputError(f"`seed` must be a whole number ≥ 0, got {seed!r}")
    sim = load_config(config, **({} if chunk_tokens is None else {"chunk_tokens": chunk_tokens}))
    if perf is not None and not str(perf).strip():  # an empty value is a mistake, not the default
        raise InputError("`perf` is empty: give analytic, a stack name, a stack file or a profile CSV")
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
    if sim.warmup_s > 0 and not (wl.n and float(wl.arrival_s[-1]) > sim.warmup_s):
        span = float(wl.arrival_s[-1]) if wl.n else 0.0
        raise InputError(
            f"config: warmup_s = {sim.warmup_s:g} excludes every request (the workload's last arrival "
            f"is at {span:g} s)"
        )
    return Scenario(
        workload=wl, model=get_model(model), perf=perf_source, sim=sim, slo=load_slo(slo), seed=seed
    )


MAX_POOL_MACHINES = 100_000  # far beyond any cluster; larger counts only exhaust memory


def resolve_design(
    name: str | None,
    *,
    prompt_gpu: str | None = None,
    token_gpu: str | None = None,
    prompt_power_cap: float | None = None,
    token_power_cap: float | None = None,
    prompt_tp: int | None = None,
    token_tp: int | None = None,
    prompt_precision: str | None = None,
    token_precision: str | None = None,
    prompt_kv_precision: str | None = None,
    token_kv_precision: str | None = None,
) -> Design:
    """A paper design by name (a starting point: GPU, cap and instance options — TP, weight and KV
    precision — change its pools), or a custom one from pool GPUs, caps and instances. Every given
    option takes effect or is refused."""
    from splitplan.catalog import validate_power_cap
    from splitplan.design import make_instance

    pc = None if prompt_power_cap is None else validate_power_cap(prompt_power_cap, "`prompt_power_cap`")
    tc = None if token_power_cap is None else validate_power_cap(token_power_cap, "`token_power_cap`")
    prompt_inst = (prompt_tp, prompt_precision, prompt_kv_precision)
    token_inst = (token_tp, token_precision, token_kv_precision)
    if name is None or name.lower().startswith("custom"):
        if prompt_gpu is None and token_gpu is None:
            if name is not None:
                raise InputError("a custom design needs `prompt_gpu` (and optionally `token_gpu`)")
            name = "splitwise-hh"
        else:
            if prompt_gpu is None:
                raise InputError("a custom design needs `prompt_gpu` (and optionally `token_gpu`)")
            return custom_design(
                prompt_gpu,
                token_gpu,
                1.0 if pc is None else pc,
                1.0 if tc is None else tc,
                prompt_tp=prompt_tp,
                token_tp=token_tp,
                prompt_precision=prompt_precision or "fp16",
                token_precision=token_precision or "fp16",
                prompt_kv_precision=prompt_kv_precision,
                token_kv_precision=token_kv_precision,
            )
    base = get_design(name)

    def pool(gpu: str | None, cap: float | None, machine: Machine, inst: tuple) -> Machine:
        tp, precision, kv = inst
        return make_instance(
            gpu if gpu is not None else machine.type.name,
            machine.power_cap if cap is None else cap,
            machine.tp if tp is None and gpu is None else tp,
            precision or machine.weight_precision,
            kv if kv is not None or precision is not None else machine.kv_precision,
        )

    if base.is_baseline:
        if token_gpu is not None or tc is not None or any(x is not None for x in token_inst):
            raise InputError(
                f"{base.name} has one pool: use `prompt_gpu`/`prompt_power_cap`/`prompt_tp`/"
                "`prompt_precision`/`prompt_kv_precision` for its machines, not the token pool's"
            )
        if prompt_gpu is None and pc is None and all(x is None for x in prompt_inst):
            return base
        m = pool(prompt_gpu, pc, base.prompt, prompt_inst)
        return Design(name=f"{base.name}:{m.name}", kind="baseline", prompt=m, token=m, policy=base.policy)
    given_any = (prompt_gpu, token_gpu, pc, tc, *prompt_inst, *token_inst)
    if all(x is None for x in given_any):
        return base
    prompt = pool(prompt_gpu, pc, base.prompt, prompt_inst)
    token = pool(token_gpu, tc, base.token, token_inst)
    if prompt == base.prompt and token == base.token:
        return base
    name = f"{base.name}:{prompt.name}/{token.name}"
    return Design(name=name, kind="splitwise", prompt=prompt, token=token, policy=base.policy)


def _count(value: int | None, option: str, low: int = 1) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{option} must be a whole number, got {value!r}")
    if not low <= value <= MAX_POOL_MACHINES:
        raise InputError(f"{option} must be between {low} and {MAX_POOL_MACHINES:,}, got {value}")
    return value


def make_config(design: Design, prompt: int | None, token: int | None, machines: int | None) -> ClusterConfig:
    prompt = _count(prompt, "`prompt`")
    token = _count(token, "`token`")
    machines = _count(machines, "`machines`")
    if design.is_baseline:
        if prompt is not None or token is not None:
            raise InputError(
                f"{design.name} is a baseline (one pool): give its size with `machines` N, "
                "not `prompt`/`token`"
            )
        if machines is None:
            raise InputError(f"{design.name} is a baseline: give its size with `machines` N")
        return ClusterConfig.baseline(design, machines)
    if machines is not None:
        raise InputError(f"{design.name} has two pools: give `prompt` P and `token` T, not `machines`")
    if prompt is None or token is None:
        raise InputError(f"{design.name} needs `prompt` P and `token` T")
    return ClusterConfig(design=design, prompt_machines=prompt, token_machines=token)


def simulate(config: ClusterConfig, scenario: Scenario, engine: str = "des") -> SimResult:
    """Simulate one configuration (the library twin of `splitplan simulate`).

    Throughput is completed requests over the arrival span; a trace whose requests all arrive at
    once has no span, and its throughput is undefined (NaN → null in JSON), not a huge number.
    """
    from dataclasses import replace

    result = _simulate(config, scenario, engine)
    wl = scenario.workload
    if wl.n < 2 or float(wl.arrival_s[-1] - wl.arrival_s[0]) <= 0:
        result = replace(result, throughput_rps=math.nan)
    return result


def requests_table(result: SimResult, scenario: Scenario | None = None):  # -> pyarrow.Table
    """Per-request results as a pyarrow table (report.output_schema: columns named with units)."""
    from splitplan.report.output_schema import build_table

    if result.per_request is None:
        raise InputError(f"the {result.engine} engine keeps no per-request results; use `engine` des")
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
