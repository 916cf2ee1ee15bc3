"""`splitplan search` as a library function: a request dataclass in, a SearchOutcome out."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from splitplan.api._simulate import WorkloadRequest, build_scenario
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


def parse_tp_list(text: str | int | None, what: str) -> tuple[int | None, ...]:
    """`--prompt-tp 2,4,8` → (2, 4, 8); absent → (None,) (the whole node). Never rounded."""
    if text is None:
        return (None,)
    out: list[int | None] = []
    for part in str(text).split(","):
        try:
            v = int(part.strip())
        except ValueError:
            raise InputError(
                f"--{what}-tp must be an integer or a comma list of integers, got {text!r}"
            ) from None
        if v < 1:
            raise InputError(f"--{what}-tp values must be ≥ 1, got {v}")
        out.append(v)
    if len(set(out)) != len(out):
        raise InputError(f"--{what}-tp repeats a value: {text}")
    return tuple(out)


def parse_precision_list(text: str | None, what: str, *, kv: bool = False) -> tuple[str | None, ...]:
    """`fp8` or `fp16,fp8` → validated names; absent → fp16 weights / KV following the weights."""
    from splitplan.catalog.precision import parse_precision

    if text is None:
        return (None,) if kv else ("fp16",)
    flag = f"--{what}-kv-precision" if kv else f"--{what}-precision"
    names = tuple(parse_precision(p, flag, kv=kv).value for p in str(text).split(","))
    if len(set(names)) != len(names):
        raise InputError(f"{flag} repeats a value: {text}")
    return names


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchRequest:
    """The CLI's options, typed. Empty `designs` and no custom pools → the six paper designs."""

    designs: tuple[str, ...] = ()
    prompt_gpus: tuple[str, ...] = ()
    token_gpus: tuple[str, ...] = ()
    prompt_power_cap: str = "1.0"
    token_power_cap: str = "1.0"
    # instances per pool: TP (a value or a comma list; None: the whole node), weight precisions,
    # KV precisions (None: follow the weights)
    prompt_tp: str | None = None
    token_tp: str | None = None
    prompt_precision: str | None = None
    token_precision: str | None = None
    prompt_kv_precision: str | None = None
    token_kv_precision: str | None = None
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


def _instance_options(req: SearchRequest, which: str) -> dict[str, tuple]:
    return {
        "tps": parse_tp_list(getattr(req, f"{which}_tp"), which),
        "precisions": parse_precision_list(getattr(req, f"{which}_precision"), which),
        "kv_precisions": parse_precision_list(getattr(req, f"{which}_kv_precision"), which, kv=True),
    }


def _has_instance_options(req: SearchRequest, which: str) -> bool:
    return any(getattr(req, f"{which}_{k}") is not None for k in ("tp", "precision", "kv_precision"))


def _scaled_default(rng: tuple[int, int], pool: PoolSpace) -> tuple[int, int]:
    """A default count range (whole nodes) in instances of the pool's smallest TP."""
    return rng[0], rng[1] * pool.max_instances_per_node()


def _excluded_by(pool_gpus: tuple[str, ...], opts: dict[str, tuple]) -> str | None:
    """Why these GPUs cannot run every instance choice (fp8 support, TP tiling), else None."""
    try:
        PoolSpace(gpus=pool_gpus, **opts)
    except InputError as exc:
        return str(exc)
    return None


def build_spaces(req: SearchRequest, notes: list[str] | None = None) -> tuple[DesignSpace, ...]:
    """The design spaces of a request. With instance options and no design named, the paper
    designs whose GPUs cannot run a chosen instance (fp8 on A100) are left out and said so in
    `notes`; a named design that cannot is an error."""
    pr = parse_range(req.prompt_range, "prompt")
    tr = parse_range(req.token_range, "token")
    notes = [] if notes is None else notes
    spaces: list[DesignSpace] = []
    custom = bool(req.prompt_gpus or req.token_gpus)
    p_opts, t_opts = _instance_options(req, "prompt"), _instance_options(req, "token")
    with_instances = _has_instance_options(req, "prompt") or _has_instance_options(req, "token")
    names = list(req.designs) or ([] if custom else list(PAPER_DESIGNS))
    for name in names:
        if name.lower().startswith("custom"):
            continue
        space = paper_space(name.lower(), max_machines=req.max_machines, prompt_range=pr, token_range=tr)
        if with_instances:
            why = _excluded_by(space.prompt.gpus, p_opts) or (
                None if space.baseline else _excluded_by(space.token.gpus, t_opts)
            )
            if why is not None:
                if req.designs:
                    raise InputError(f"{space.name}: {why}")
                notes.append(f"{space.name} left out: {why}")
                continue
            space = _with_instances(space, p_opts, t_opts, explicit_prompt=pr, explicit_token=tr)
            if space.baseline and _has_instance_options(req, "token"):
                notes.append(f"{space.name}: one pool, run with the prompt-pool instance options")
        spaces.append(space)
    if custom:
        if not req.prompt_gpus:
            raise InputError("a custom design needs --prompt-gpu (and optionally --token-gpu)")
        baseline = any(n.lower().startswith("baseline") for n in req.designs) and not req.token_gpus
        if baseline and _has_instance_options(req, "token"):
            raise InputError(
                "a custom baseline has one pool: give its instance with --prompt-tp/--prompt-precision"
            )
        cap = req.max_machines
        hi = cap if cap is not None else (DEFAULT_BASELINE_MAX if baseline else DEFAULT_SPLIT_RANGE[1])
        default = (1, hi)
        prompt = PoolSpace(gpus=tuple(req.prompt_gpus), power_cap=parse_cap(req.prompt_power_cap), **p_opts)
        token = PoolSpace(
            gpus=tuple(req.token_gpus or req.prompt_gpus), power_cap=parse_cap(req.token_power_cap), **t_opts
        )
        label = "custom-" + "+".join(prompt.gpus) + ("" if baseline else "/" + "+".join(token.gpus))
        spaces = [s for s in spaces if not s.name.startswith("baseline") or not baseline]
        spaces.append(
            DesignSpace(
                name=label,
                baseline=baseline,
                prompt=prompt,
                token=token,
                prompt_range=pr or _scaled_default(default, prompt),
                token_range=tr or _scaled_default(default, token),
            )
        )
    if not spaces:
        raise InputError("no design can run the chosen instances: " + "; ".join(notes))
    if _has_instance_options(req, "token") and all(s.baseline for s in spaces):
        raise InputError(
            "a baseline has one pool: give its instance with --prompt-tp/--prompt-precision "
            "(the --token-* instance options are for Splitwise designs)"
        )
    return tuple(spaces)


def _with_instances(
    space: DesignSpace,
    p_opts: dict[str, tuple],
    t_opts: dict[str, tuple],
    *,
    explicit_prompt: tuple[int, int] | None,
    explicit_token: tuple[int, int] | None,
) -> DesignSpace:
    from dataclasses import replace

    prompt = replace(space.prompt, **p_opts)
    token = prompt if space.baseline else replace(space.token, **t_opts)
    return replace(
        space,
        prompt=prompt,
        token=token,
        prompt_range=explicit_prompt or _scaled_default(space.prompt_range, prompt),
        token_range=space.token_range
        if space.baseline
        else (explicit_token or _scaled_default(space.token_range, token)),
    )


def build_problem(req: SearchRequest, rate_rps: float, notes: list[str] | None = None) -> SearchProblem:
    power, cost = req.power_budget_kw, req.cost_budget_usd_per_h
    if req.budget is not None:
        p2, c2 = named_budget(req.budget)
        power = power if p2 is None else p2
        cost = cost if c2 is None else c2
    spaces = build_spaces(req, notes)
    if req.objective == "throughput" and power is None and cost is None:
        raise InputError(
            "the throughput objective needs a budget: --power-budget-kw, "
            "--cost-budget-usd-per-h or --budget iso-power|iso-cost"
        )
    if req.objective == "throughput" and req.max_machines is None and req.prompt_range is None:
        # under a budget the count ranges follow from it (iso-power AA reaches 70 machines)
        spaces = tuple(_budget_ranges(s, power, cost) for s in spaces)
    return SearchProblem(
        spaces=spaces,
        objective=req.objective,
        rate_rps=rate_rps,  # type: ignore[arg-type]
        power_budget_kw=power,
        cost_budget_usd_per_h=cost,
        engine=req.engine,  # type: ignore[arg-type]
        method=req.method,
        trials=req.trials,
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
    notes: list[str] = []
    problem = build_problem(req, float(rate), notes)
    _check_instances_fit(problem, scenario)
    runner = Runner(jobs=req.jobs, backend=req.backend, scheduler=req.scheduler)
    with PointStore(req.storage, scenario_fingerprint(scenario)) as store:
        outcome = run_search(
            problem, evaluator or SimEvaluator(scenario), runner=runner, store=store, progress=progress
        )
    return replace(outcome, notes=tuple(notes)) if notes else outcome


def _check_instances_fit(problem: SearchProblem, scenario) -> None:
    """Every instance choice must hold the model and some KV (before any search time is spent)."""
    from splitplan.perf import kv_capacity_bytes
    from splitplan.search.problem import instance_machine

    for space in problem.spaces:
        pools = [("prompt", space.prompt)] + ([] if space.baseline else [("token", space.token)])
        for which, pool in pools:
            for choice in pool.instance_choices():
                m = instance_machine(choice, pool.power_cap[0])
                try:
                    kv_capacity_bytes(scenario.model, m, scenario.weight_bytes_on(m))
                except InputError as exc:
                    raise type(exc)(
                        f"{space.name} {which} pool: {exc} (or drop it from --{which}-tp)"
                    ) from None
