"""`splitplan search` as a library function: a request dataclass in, a SearchOutcome out."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, replace
from pathlib import Path

from splitplan._numbers import is_number
from splitplan.api._simulate import WorkloadRequest, build_scenario
from splitplan.api._validate import apply_named_caps, check_search_request, check_spaces, space_size
from splitplan.design import CHUNKED_DESIGNS, SEARCH_DESIGNS
from splitplan.errors import InputError, redact
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
from splitplan.search.objective import Engine, Method, Objective, parse_enum
from splitplan.search.parallel import ProgressSink, check_execution
from splitplan.search.problem import DEFAULT_BAND, DEFAULT_BASELINE_MAX, DEFAULT_SPLIT_RANGE
from splitplan.slo import SloSpec

Cap = float | tuple[float, float]


class _DefaultCap(tuple):
    """The cap a request gets when none is given: (1.0, 1.0) for custom pools, while named designs
    keep their own caps (splitwise-hhcap's token pool stays at 0.7). It equals (1.0, 1.0); only its
    identity tells "not given" from an explicit 1.0, which a named design does take."""

    __slots__ = ()


DEFAULT_CAP: tuple[float, float] = _DefaultCap((1.0, 1.0))


def cap_given(value: object) -> bool:
    return value is not None and value is not DEFAULT_CAP


def _cap_interval(value: Cap | None, name: str) -> tuple[float, float]:
    """A fixed cap 0.7 → (0.7, 0.7); an interval (0.5, 1.0) is a search dimension."""
    if value is None or value is DEFAULT_CAP:
        return DEFAULT_CAP
    if isinstance(value, tuple) and len(value) == 2:
        lo, hi = value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        lo = hi = value
    else:
        raise InputError(f"`{name}` must be a number or a (lo, hi) pair, got {value!r}")
    for v in (lo, hi):
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise InputError(f"`{name}` must be a number or a (lo, hi) pair, got {value!r}")
    return float(lo), float(hi)


def _count_range(value: tuple[int, int] | None, name: str) -> tuple[int, int] | None:
    if value is None:
        return None
    ok = isinstance(value, tuple) and len(value) == 2
    if (
        not ok
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        or not 1 <= value[0] <= value[1]
    ):
        raise InputError(f"`{name}` must be a pair of whole numbers 1 ≤ lo ≤ hi, got {value!r}")
    return value


def _tp_choices(value: object, name: str) -> tuple[int, ...] | None:
    """A TP 4 or TPs (2, 4, 8) → a tuple; None → the whole node. Never rounded."""
    if value is None:
        return None
    values = value if isinstance(value, tuple) else (value,)
    if not values or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise InputError(f"`{name}` must be an integer or a comma list of integers, got {value!r}")
    for v in values:
        if v < 1:
            raise InputError(f"`{name}` values must be ≥ 1, got {v}")
    if len(set(values)) != len(values):
        raise InputError(f"`{name}` repeats a value: {value!r}")
    return values  # type: ignore[return-value]


def _precision_choices(value: object, name: str, *, kv: bool = False) -> tuple[str, ...] | None:
    """A precision "fp8" or precisions ("fp16", "fp8") → validated names; None → the default."""
    from splitplan.catalog.precision import parse_precision

    if value is None:
        return None
    values = value if isinstance(value, tuple) else (value,)
    if not values:
        raise InputError(f"`{name}` needs at least one precision")
    names = tuple(parse_precision(v, f"`{name}`", kv=kv).value for v in values)
    if len(set(names)) != len(names):
        raise InputError(f"`{name}` repeats a value: {value!r}")
    return names


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchRequest:
    """What to search, typed: numbers, tuples and enums (the CLI parses its strings into these).

    Empty `designs` and no custom pools → the six paper designs and the two
    chunked-prefill baselines. Power caps are a number (fixed)
    or a (lo, hi) interval (searched); count ranges are (lo, hi) machine counts, inclusive.
    """

    designs: tuple[str, ...] = ()
    prompt_gpus: tuple[str, ...] = ()
    token_gpus: tuple[str, ...] = ()
    # not given (DEFAULT_CAP or None): named designs keep their caps, custom pools run at 1.0
    prompt_power_cap: Cap | None = DEFAULT_CAP
    token_power_cap: Cap | None = DEFAULT_CAP
    # instances per pool: TP (one or a tuple of choices; None: the whole node), weight precisions
    # (None: fp16), KV precisions (None: follow the weights)
    prompt_tp: int | tuple[int, ...] | None = None
    token_tp: int | tuple[int, ...] | None = None
    prompt_precision: str | tuple[str, ...] | None = None
    token_precision: str | tuple[str, ...] | None = None
    prompt_kv_precision: str | tuple[str, ...] | None = None
    token_kv_precision: str | tuple[str, ...] | None = None
    prompt_range: tuple[int, int] | None = None
    token_range: tuple[int, int] | None = None
    max_machines: int | None = None
    workload: WorkloadRequest = field(default_factory=WorkloadRequest)
    model: str = "llama2-70b"
    perf: str | None = None
    config: str | Path | None = None
    chunk_tokens: int | None = None  # chunked-prefill budget (overrides the config's)
    slo: SloSpec | str | Path | None = None  # limits, or a TOML file of them (None: the defaults)
    objective: Objective = Objective.COST
    power_budget_kw: float | None = None
    cost_budget_usd_per_h: float | None = None
    budget: str | None = None
    engine: Engine = Engine.HYBRID
    method: Method = Method.AUTO
    trials: int = 200
    band: float = DEFAULT_BAND
    rate_tol: float = 0.02
    seed: int = 0
    jobs: int = 1
    backend: str = "loky"
    scheduler: str | None = None
    storage: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "objective", parse_enum(Objective, self.objective, "objective"))
        object.__setattr__(self, "engine", parse_enum(Engine, self.engine, "engine"))
        object.__setattr__(self, "method", parse_enum(Method, self.method, "method"))
        object.__setattr__(self, "prompt_power_cap", _cap_interval(self.prompt_power_cap, "prompt_power_cap"))
        object.__setattr__(self, "token_power_cap", _cap_interval(self.token_power_cap, "token_power_cap"))
        object.__setattr__(self, "prompt_range", _count_range(self.prompt_range, "prompt_range"))
        object.__setattr__(self, "token_range", _count_range(self.token_range, "token_range"))
        for pool in ("prompt", "token"):
            tp = f"{pool}_tp"
            object.__setattr__(self, tp, _tp_choices(getattr(self, tp), tp))
            for field_name, kv in ((f"{pool}_precision", False), (f"{pool}_kv_precision", True)):
                value = _precision_choices(getattr(self, field_name), field_name, kv=kv)
                object.__setattr__(self, field_name, value)
        mm = self.max_machines
        if mm is not None and (isinstance(mm, bool) or not isinstance(mm, int) or mm < 1):
            raise InputError(f"`max_machines` must be a whole number ≥ 1, got {mm!r}")
        _check_types(self)
        if self.engine is Engine.ANALYTIC:
            _check_no_des_runs(self)  # first: whatever their values, the options do nothing here
        check_execution(self.jobs, self.backend, self.scheduler)


def _names(value: object, name: str) -> tuple[str, ...]:
    """A tuple (or list) of names → a tuple; a bare string is refused, not read letter by letter."""
    if not isinstance(value, tuple | list) or not all(isinstance(v, str) for v in value):
        raise InputError(f"`{name}` must be a list of names, got {value!r}")
    return tuple(value)


def _is_whole(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check_types(req: SearchRequest) -> None:
    """The types of the fields `__post_init__` does not parse: a library caller's or a request
    file's "0.3" or 5 must be one line naming the field here, not a TypeError deep in the search
    (a comparison of str and int) or an AttributeError (`.lower` of a number)."""
    for name in _TUPLE_FIELDS:
        object.__setattr__(req, name, _names(getattr(req, name), name))
    if not isinstance(req.workload, WorkloadRequest):
        raise InputError(f"`workload` must be a WorkloadRequest, got {req.workload!r}")
    if not isinstance(req.model, str):
        raise InputError(f"`model` must be a model name, got {req.model!r}")
    for name in ("perf", "budget", "storage"):  # `backend`, `scheduler`: check_execution
        v = getattr(req, name)
        if v is not None and not isinstance(v, str):
            raise InputError(f"`{name}` must be a string, got {v!r}")
    if req.config is not None and not isinstance(req.config, str | Path):
        raise InputError(f"`config` must be a file path, got {req.config!r}")
    if req.slo is not None and not isinstance(req.slo, SloSpec | str | Path):
        raise InputError(f"`slo` must be a SloSpec or an SLO file path, got {req.slo!r}")
    ct = req.chunk_tokens
    if ct is not None and not (_is_whole(ct) and ct >= 1):
        raise InputError(f"`chunk_tokens` must be a whole number ≥ 1, got {ct!r}")
    for name in ("power_budget_kw", "cost_budget_usd_per_h"):
        v = getattr(req, name)
        if v is not None and not (is_number(v) and math.isfinite(v) and v > 0):
            raise InputError(f"`{name}` must be a positive finite number, got {v!r}")
    if not (_is_whole(req.trials) and req.trials >= 1):
        raise InputError(f"`trials` must be a whole number ≥ 1, got {req.trials!r}")
    if not (is_number(req.band) and math.isfinite(req.band) and req.band >= 0):
        raise InputError(f"`band` must be a number ≥ 0, got {req.band!r}")
    if not (is_number(req.rate_tol) and 0 < req.rate_tol < 1):
        raise InputError(f"`rate_tol` must be a number in (0, 1), got {req.rate_tol!r}")
    if not (_is_whole(req.seed) and req.seed >= 0):
        raise InputError(f"`seed` must be a whole number ≥ 0, got {req.seed!r}")


_TUPLE_FIELDS = ("designs", "prompt_gpus", "token_gpus")


def _check_no_des_runs(req: SearchRequest) -> None:
    """The analytic engine screens every point in this process and runs no DES, so the options
    that say where DES runs go (`jobs`, `backend`, `scheduler`) would be silently ignored: refused,
    whether the command line or a saved request gives them."""
    why = "`engine` analytic runs none (use `engine` hybrid or des to run them)"
    if req.backend == "dask" or req.scheduler is not None:
        raise InputError(f"`backend` dask and `scheduler` send DES runs to a Dask cluster; {why}")
    jobs = req.jobs
    if isinstance(jobs, int) and not isinstance(jobs, bool) and (jobs > 1 or jobs == -1):
        raise InputError(f"`jobs` runs DES points in parallel; {why}")  # others: check_execution's line


def uses_trials(req: SearchRequest, spaces: tuple[DesignSpace, ...]) -> bool:
    """Whether any of `spaces` is searched with Optuna, the only method that takes `trials`
    (`method` auto searches spaces of up to two dimensions on an exhaustive grid): tells a caller
    that set `trials` whether it takes effect."""
    from splitplan.search.run import uses_optuna

    problem = SearchProblem(spaces=spaces, method=req.method, engine=req.engine)
    return any(uses_optuna(problem, s) for s in spaces)


def _instance_options(req: SearchRequest, which: str) -> dict[str, tuple]:
    return {
        "tps": getattr(req, f"{which}_tp") or (None,),
        "precisions": getattr(req, f"{which}_precision") or ("fp16",),
        "kv_precisions": getattr(req, f"{which}_kv_precision") or (None,),
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
    check_search_request(req)
    pr, tr = req.prompt_range, req.token_range
    notes = [] if notes is None else notes
    spaces: list[DesignSpace] = []
    custom = bool(req.prompt_gpus or req.token_gpus)
    p_opts, t_opts = _instance_options(req, "prompt"), _instance_options(req, "token")
    with_instances = _has_instance_options(req, "prompt") or _has_instance_options(req, "token")
    names = list(req.designs) or ([] if custom else list(SEARCH_DESIGNS))
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
            raise InputError("a custom design needs `prompt_gpus` (and optionally `token_gpus`)")
        baseline = any(n.lower().startswith("baseline") for n in req.designs) and not req.token_gpus
        if baseline and _has_instance_options(req, "token"):
            raise InputError(
                "a custom baseline has one pool: give its instance with `prompt_tp`/`prompt_precision`"
            )
        cap = req.max_machines
        hi = cap if cap is not None else (DEFAULT_BASELINE_MAX if baseline else DEFAULT_SPLIT_RANGE[1])
        default = (1, hi)
        prompt = PoolSpace(gpus=tuple(req.prompt_gpus), power_cap=tuple(req.prompt_power_cap), **p_opts)  # type: ignore[arg-type]
        token = PoolSpace(
            gpus=tuple(req.token_gpus or req.prompt_gpus),
            power_cap=tuple(req.token_power_cap),  # type: ignore[arg-type]
            **t_opts,
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
                auto_range=cap is None and pr is None and tr is None,
            )
        )
    if not spaces:
        raise InputError("no design can run the chosen instances: " + "; ".join(notes))
    if _has_instance_options(req, "token") and all(s.baseline for s in spaces):
        raise InputError(
            "a baseline has one pool: give its instance with `prompt_tp`/`prompt_precision` "
            "(`token_tp`, `token_precision` and `token_kv_precision` are for Splitwise designs)"
        )
    spaces_t = apply_named_caps(tuple(spaces), req)
    check_spaces(spaces_t, max_machines=req.max_machines)
    return spaces_t


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
    objective = req.objective
    if objective is Objective.THROUGHPUT and power is None and cost is None:
        raise InputError(
            "the throughput objective needs a budget: `power_budget_kw`, "
            "`cost_budget_usd_per_h` or `budget` (iso-power or iso-cost)"
        )
    if objective is Objective.THROUGHPUT and req.max_machines is None and req.prompt_range is None:
        # under a budget the count ranges follow from it (iso-power AA reaches 70 machines)
        spaces = tuple(_budget_ranges(s, power, cost) for s in spaces)
    sizes = [space_size(s) for s in spaces]
    trials = int(min(req.trials, max(sizes))) if sizes and math.isfinite(max(sizes)) else req.trials
    return SearchProblem(
        spaces=spaces,
        objective=objective,
        rate_rps=rate_rps,  # type: ignore[arg-type]
        power_budget_kw=power,
        cost_budget_usd_per_h=cost,
        engine=req.engine,
        method=req.method,
        trials=trials,  # beyond a finite space's size, trials would only repeat points
        seed=req.seed,
        band=req.band,
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
    n = max(1, min(limits))  # whole nodes; a pool of smaller instances counts them in its smallest TP
    if space.baseline:
        return replace(space, prompt_range=_scaled_default((1, n), space.prompt))
    split = (1, max(1, n - 1))
    return replace(
        space,
        prompt_range=_scaled_default(split, space.prompt),
        token_range=_scaled_default(split, space.token),
    )


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
        workload=req.workload,
        model=req.model,
        perf=req.perf,
        config=req.config,
        slo=req.slo,
        seed=req.seed,
        chunk_tokens=req.chunk_tokens,
    )
    rate = scenario.workload.offered_rate_rps  # one definition (workload.base)
    notes: list[str] = []
    problem = build_problem(req, float(rate), notes)
    _check_instances_fit(problem, scenario)
    if problem.engine is Engine.ANALYTIC:
        from splitplan.sim.analytic import check_modelled

        for space in problem.spaces:
            check_modelled(space.design(), scenario)
    if req.chunk_tokens is not None and not any(sp.name in CHUNKED_DESIGNS for sp in problem.spaces):
        raise InputError(
            "`chunk_tokens` applies to chunked-prefill designs: add `design` chunked-a100 or chunked-h100"
        )
    from splitplan.search.store import CooperativeEvaluator, open_board

    fingerprint = scenario_fingerprint(scenario)
    board = open_board(req.storage, fingerprint)  # processes sharing a storage share the work
    runner = Runner(jobs=req.jobs, backend=req.backend, scheduler=req.scheduler, board=board)
    inner = evaluator or SimEvaluator(scenario)
    ev = inner if board is None else CooperativeEvaluator(inner, board)
    try:
        with PointStore(req.storage, fingerprint) as store:
            outcome = run_search(problem, ev, runner=runner, store=store, progress=progress)
            answer = store.record_answer(problem, outcome.points, board)
            if answer is not None and store.location is not None:
                where = redact(store.location.optuna_spelling)  # notes reach the JSON output
                notes.append(f"the decided points are Optuna study {answer} in {where}")
    finally:
        if board is not None:
            board.close()
    return replace(outcome, notes=tuple(notes)) if notes else outcome


def _check_instances_fit(problem: SearchProblem, scenario) -> None:
    """Every instance choice must hold the model and the workload's largest request (before any
    search time is spent): the DES refuses a request too large for an instance at any pool size,
    and so does the analytic evaluator, so a choice that cannot hold it is refused by name here
    rather than midway through a search, whichever choice the search would have reached first."""
    from splitplan.design import ClusterConfig, Design
    from splitplan.perf import kv_capacity_bytes
    from splitplan.search.problem import instance_machine
    from splitplan.sim.des.run import check_requests_fit

    for space in problem.spaces:
        pools = [("prompt", space.prompt)] + ([] if space.baseline else [("token", space.token)])
        for which, pool in pools:
            for choice in pool.instance_choices():
                m = instance_machine(choice, pool.power_cap[0])
                try:
                    kv_capacity_bytes(scenario.model, m, scenario.weight_bytes_on(m))
                    alone = Design(name=m.name, kind="baseline", prompt=m, token=m)  # m's test only
                    check_requests_fit(ClusterConfig.baseline(alone, 1), scenario)
                except InputError as exc:
                    raise type(exc)(
                        f"{space.name} {which} pool: {exc} (or drop it from `{which}_tp`)"
                    ) from None
