"""`--export-plan` as library functions: a search's or a simulation's answer as a deployment plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from splitplan.api._search import SearchRequest, build_spaces
from splitplan.api._simulate import build_scenario
from splitplan.design import ClusterConfig
from splitplan.errors import InfeasibleError, InputError
from splitplan.report.metrics import config_metrics
from splitplan.report.plan import deployment_plan, write_plan
from splitplan.search import SearchOutcome
from splitplan.search.problem import DesignSpace
from splitplan.search.result import DesignResult
from splitplan.sim import Scenario, SimResult


def check_plan_path(path: str | Path | None) -> None:
    """Refuse a plan file name before any work is done (so a long search is not wasted)."""
    if path is None:
        return
    from splitplan._io import check_output_path

    check_output_path(path, "`export_plan`", (".yaml", ".yml"))


def _scenario(req: SearchRequest) -> Scenario:
    return build_scenario(
        workload=req.workload, model=req.model, perf=req.perf, config=req.config, slo=req.slo, seed=req.seed
    )


def _spaces(req: SearchRequest) -> dict[str, DesignSpace]:
    return {s.name: s for s in build_spaces(req)}


def _config_of(spaces: dict[str, DesignSpace], r: DesignResult) -> ClusterConfig:
    """The configuration a result describes, in the space (of `_spaces`) it came from."""
    space = spaces.get(r.design)
    if space is None:  # a result always comes from one of the request's spaces
        raise InputError(f"design {r.design!r} is not part of this search request")
    # the result's own instances (TP, precisions) and counts of them, not the pools' first choice
    # and the node counts: the two differ wherever an instance is less than a node
    pi = space.prompt.choice_of(r.prompt_gpu, r.prompt_tp, r.prompt_precision, r.prompt_kv_precision)
    ti = (
        pi
        if space.baseline
        else space.token.choice_of(r.token_gpu, r.token_tp, r.token_precision, r.token_kv_precision)
    )
    design = space.design(
        r.prompt_gpu,
        r.token_gpu,
        r.prompt_power_cap,
        r.token_power_cap,
        prompt_instance=pi,
        token_instance=ti,
    )
    p, t = r.instance_counts
    assert p is not None
    if r.baseline:
        return ClusterConfig.baseline(design, p)
    assert t is not None
    return ClusterConfig(design=design, prompt_machines=p, token_machines=t)


def search_plan(
    req: SearchRequest,
    outcome: SearchOutcome,
    *,
    design: str | None = None,
    scenario: Scenario | None = None,
) -> dict[str, Any]:
    """The plan of the search's winner (or of `design`'s best configuration).

    Raises InfeasibleError when that design (or every design) has no configuration meeting the SLOs.
    """
    if design is None:
        chosen = outcome.best
        if chosen is None:
            raise InfeasibleError("no design meets all nine SLOs: no deployment plan written")
    else:
        found = [r for r in outcome.results if r.design == design]
        if not found:
            names = ", ".join(r.design for r in outcome.results)
            raise InputError(f"design {design!r} was not searched (searched: {names})")
        chosen = found[0]
        if not chosen.meets_slo:
            raise InfeasibleError(f"{design} meets the SLOs nowhere in the searched space: no plan written")
    scenario = scenario or _scenario(req)
    return deployment_plan(
        _config_of(_spaces(req), chosen),
        scenario,
        command="search",
        engine=outcome.engine,
        objective=outcome.objective,
        meets_slo=chosen.meets_slo,
        binding_slo=chosen.binding_slo,
        headroom=chosen.headroom,
        rate_rps=chosen.rate_rps,
        sized_for_rate_rps=chosen.rate_rps,
        slowdown={k: v for k, v in chosen.slowdown.items() if v is not None},
        verified_by=chosen.verified_by,
        design_label=chosen.design,
    )


def simulation_plan(result: SimResult, scenario: Scenario) -> dict[str, Any]:
    """The plan of one simulated configuration (its verdict is part of the plan)."""
    return deployment_plan(
        result.config,
        scenario,
        command="simulate",
        engine=result.engine,
        objective=None,
        meets_slo=result.meets_slo,
        binding_slo=result.verdict.binding,
        headroom=result.verdict.headroom,
        rate_rps=result.throughput_rps,
        slowdown=result.slowdown,
        latency_s=result.latency_s,
    )


def export_plan(doc: dict[str, Any], path: str | Path) -> Path:
    """Write a plan document as YAML, atomically."""
    check_plan_path(path)
    return write_plan(doc, path)


def simulation_metrics(result: SimResult, scenario: Scenario) -> dict[str, float | None]:
    """Served-token metrics of a simulation at its measured throughput (report.metrics)."""
    return config_metrics(result.config, scenario.workload, result.throughput_rps)


def search_metrics(
    req: SearchRequest, outcome: SearchOutcome, scenario: Scenario | None = None
) -> dict[str, dict[str, float | None] | None]:
    """Per design: served-token metrics of its best configuration at the rate it was judged at;
    None for a design with no configuration meeting the SLOs."""
    scenario = scenario or _scenario(req)
    out: dict[str, dict[str, float | None] | None] = {}
    spaces = _spaces(req)  # built once for every design's result
    for r in outcome.results:
        out[r.design] = (
            config_metrics(_config_of(spaces, r), scenario.workload, r.rate_rps) if r.meets_slo else None
        )
    return out
