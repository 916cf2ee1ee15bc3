"""`splitplan search` as a library function: a request dataclass in, a SearchOutcome out."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from splitplan.api._simulate import WorkloadRequest, build_scenario
from splitplan.api._validate import apply_named_caps, check_search_request, check_spaces, space_size
from splitplan.design import PAPER_DESIGNS
from splitplan.errors import InputError
from splitplan.search import (
    DesignSpace,
    Evaluator,
    PointStore,
    PoolSpace,
    Runner,
    SearchOutcome,
    SearchProblem,
    SimEvaluator,
    named_budget,
    paper_space,
    run_search,
    scenario_fingerprint,
)
from splitplan.search.parallel import ProgressSink
from splitplan.search.problem import DEFAULT_BASELINE_MAX, DEFAULT_SPLIT_RANGE


def parse_cap(text: str | float) -> tuple[float, float]:
    """A power cap "0.7" (fixed) or an interval "0.5:1.0" (a search dimension)."""
    s = str(text)
    try:
        if ":" in s:
            lo, hi = (float(x) for x in s.split(":", 1))
            return lo, hi
        v = float(s)
    except ValueError:
        raise InputError(f"power cap must be a number or LO:HI, got {text!r}") from None
    return v, v


def parse_range(text: str | None, what: str) -> tuple[int, int] | None:
    if text is None:
        return None
    try:
        lo, hi = (int(x) for x in str(text).split(":", 1)) if ":" in str(text) else (int(text),) * 2
    except ValueError:
        raise InputError(f"{what} range must be A:B with integers, got {text!r}") from None
    return lo, hi


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchRequest:
    """The CLI's options, typed. Empty `designs` and no custom pools → the six paper designs."""

    designs: tuple[str, ...] = ()
    prompt_gpus: tuple[str, ...] = ()
    token_gpus: tuple[str, ...] = ()
    prompt_power_cap: str | None = None  # None: named designs keep theirs, custom pools run at 1.0
    token_power_cap: str | None = None
    prompt_range: str | None = None
    token_range: str | None = None
    max_machines: int | None = None
    workload: WorkloadRequest = field(default_factory=WorkloadRequest)
    model: str = "llama2-70b"
    perf: str | None = None
    config: str | Path | None = None
    slo: str | Path | None = None
    objective: str = "cost"
    power_budget_kw: float | None = None
    cost_budget_usd_per_h: float | None = None
    budget: str | None = None
    engine: str = "hybrid"
    method: str = "auto"
    trials: int = 200
    band: float = 0.3
    rate_tol: float = 0.02
    seed: int = 0
    jobs: int = 1
    backend: str = "loky"
    scheduler: str | None = None
    storage: str | None = None


def build_spaces(req: SearchRequest) -> tuple[DesignSpace, ...]:
    check_search_request(req)
    pr = parse_range(req.prompt_range, "prompt")
    tr = parse_range(req.token_range, "token")
    spaces: list[DesignSpace] = []
    custom = bool(req.prompt_gpus or req.token_gpus)
    names = list(req.designs) or ([] if custom else list(PAPER_DESIGNS))
    for name in names:
        if name.lower().startswith("custom"):
            continue
        spaces.append(
            paper_space(name.lower(), max_machines=req.max_machines, prompt_range=pr, token_range=tr)
        )
    if custom:
        if not req.prompt_gpus:
            raise InputError("a custom design needs --prompt-gpu (and optionally --token-gpu)")
        baseline = any(n.lower().startswith("baseline") for n in req.designs) and not req.token_gpus
        cap = req.max_machines
        hi = cap if cap is not None else (DEFAULT_BASELINE_MAX if baseline else DEFAULT_SPLIT_RANGE[1])
        default = (1, hi)
        prompt = PoolSpace(gpus=tuple(req.prompt_gpus), power_cap=parse_cap(req.prompt_power_cap or "1.0"))
        token = PoolSpace(
            gpus=tuple(req.token_gpus or req.prompt_gpus), power_cap=parse_cap(req.token_power_cap or "1.0")
        )
        label = "custom-" + "+".join(prompt.gpus) + ("" if baseline else "/" + "+".join(token.gpus))
        spaces = [s for s in spaces if not s.name.startswith("baseline") or not baseline]
        spaces.append(
            DesignSpace(
                name=label,
                baseline=baseline,
                prompt=prompt,
                token=token,
                prompt_range=pr or default,
                token_range=tr or default,
            )
        )
    spaces_t = apply_named_caps(tuple(spaces), req)
    check_spaces(spaces_t)
    return spaces_t


def build_problem(req: SearchRequest, rate_rps: float) -> SearchProblem:
    power, cost = req.power_budget_kw, req.cost_budget_usd_per_h
    if req.budget is not None:
        p2, c2 = named_budget(req.budget)
        power = power if p2 is None else p2
        cost = cost if c2 is None else c2
    spaces = build_spaces(req)
    if req.objective == "throughput" and power is None and cost is None:
        raise InputError(
            "the throughput objective needs a budget: --power-budget-kw, "
            "--cost-budget-usd-per-h or --budget iso-power|iso-cost"
        )
    if req.objective == "throughput" and req.max_machines is None and req.prompt_range is None:
        # under a budget the count ranges follow from it (iso-power AA reaches 70 machines)
        spaces = tuple(_budget_ranges(s, power, cost) for s in spaces)
    sizes = [space_size(s) for s in spaces]
    trials = int(min(req.trials, max(sizes))) if sizes and math.isfinite(max(sizes)) else req.trials
    return SearchProblem(
        spaces=spaces,
        objective=req.objective,
        rate_rps=rate_rps,  # type: ignore[arg-type]
        power_budget_kw=power,
        cost_budget_usd_per_h=cost,
        engine=req.engine,  # type: ignore[arg-type]
        method=req.method,
        trials=trials,  # beyond a finite space's size, trials would only repeat points
        seed=req.seed,
        band=req.band,  # type: ignore[arg-type]
        rate_tol=req.rate_tol,
    )


def _budget_ranges(space: DesignSpace, power: float | None, cost: float | None) -> DesignSpace:
    from dataclasses import replace

    from splitplan.catalog import get_machine_type

    cheapest_kw = min(
        get_machine_type(g).rated_power_kw * space.prompt.power_cap[0]
        for g in space.prompt.gpus + space.token.gpus
    )
    cheapest_usd = min(get_machine_type(g).cost_usd_per_h for g in space.prompt.gpus + space.token.gpus)
    limits = []
    if power is not None:
        limits.append(int(power / cheapest_kw + 1e-9))
    if cost is not None:
        limits.append(int(cost / cheapest_usd + 1e-9))
    n = max(1, min(limits))
    if space.baseline:
        return replace(space, prompt_range=(1, n))
    return replace(space, prompt_range=(1, max(1, n - 1)), token_range=(1, max(1, n - 1)))


def search(
    req: SearchRequest | None = None,
    *,
    progress: ProgressSink | None = None,
    evaluator: Evaluator | None = None,
) -> SearchOutcome:
    """Find, per design, the configuration that best meets the objective with all nine SLOs.

    `evaluator` replaces the analytic screen + DES (tests use closed-form fakes).
    """
    req = req or SearchRequest()
    scenario = build_scenario(
        workload=req.workload, model=req.model, perf=req.perf, config=req.config, slo=req.slo, seed=req.seed
    )
    rate = (
        req.workload.rate_rps
        if req.workload.trace is None and req.workload.rate_rps
        else scenario.workload.rate_rps
    )
    problem = build_problem(req, float(rate))
    from splitplan.search.store import CooperativeEvaluator, open_board

    fingerprint = scenario_fingerprint(scenario)
    board = open_board(req.storage, fingerprint)  # processes sharing a storage share the work
    runner = Runner(jobs=req.jobs, backend=req.backend, scheduler=req.scheduler, board=board)
    inner = evaluator or SimEvaluator(scenario)
    ev = inner if board is None else CooperativeEvaluator(inner, board)
    try:
        with PointStore(req.storage, fingerprint) as store:
            return run_search(problem, ev, runner=runner, store=store, progress=progress)
    finally:
        if board is not None:
            board.close()
