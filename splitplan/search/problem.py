"""Layer 5: a search problem as data — design spaces, count ranges, objective, budgets, engine.

A `DesignSpace` is one row of the result table: a named paper design (GPU types and caps fixed,
counts searched) or a custom family whose GPU types and power caps may be search dimensions too.
Validation happens here, once, so the strategies can assume a well-formed problem.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from splitplan._numbers import is_number
from splitplan.catalog import Machine, get_machine_type, validate_power_cap
from splitplan.design import (
    SEARCH_DESIGNS,
    BatchPolicy,
    Design,
    custom_design,
    get_design,
    make_instance,
)
from splitplan.errors import InputError
from splitplan.search.objective import Engine, Method, NamedBudget, Objective, parse_enum

OBJECTIVES: tuple[str, ...] = tuple(m.value for m in Objective)
ENGINES: tuple[str, ...] = tuple(m.value for m in Engine)
METHODS: tuple[str, ...] = tuple(m.value for m in Method)

# The hybrid's analytic-margin band (SearchProblem.band): search and heatmap share it.
DEFAULT_BAND = 0.3

# Paper's named budgets (SPLITWISE.md §8): the power and the cost of 40 DGX-H100.
NAMED_BUDGET_MACHINES = 40


def named_budget(name: str) -> tuple[float | None, float | None]:
    """(power_budget_kw, cost_budget_usd_per_h) of `iso-power` or `iso-cost`."""
    h100 = get_machine_type("dgx-h100")
    key = name.lower() if isinstance(name, str) else name
    if key == NamedBudget.ISO_POWER:
        return NAMED_BUDGET_MACHINES * h100.rated_power_kw, None
    if key == NamedBudget.ISO_COST:
        return None, NAMED_BUDGET_MACHINES * h100.cost_usd_per_h
    known = ", ".join(b.value for b in NamedBudget)
    raise InputError(f"unknown budget {name!r} (known: {known})")


def _check_range(r: tuple[int, int], what: str) -> tuple[int, int]:
    lo, hi = r
    if not (isinstance(lo, int) and isinstance(hi, int)) or lo < 1 or hi < lo:
        raise InputError(f"{what} range must be integers 1 ≤ lo ≤ hi, got {lo!r}:{hi!r}")
    return lo, hi


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolSpace:
    """Choices for one pool: GPU/machine types (one = fixed), a power-cap interval (lo = hi: fixed),
    and the instance: tensor-parallel sizes (`None`: the whole node), weight precisions and KV
    precisions (`None`: follow the weights). Every combination must be a valid instance."""

    gpus: tuple[str, ...]
    power_cap: tuple[float, float] = (1.0, 1.0)
    tps: tuple[int | None, ...] = (None,)
    precisions: tuple[str, ...] = ("fp16",)
    kv_precisions: tuple[str | None, ...] = (None,)

    def __post_init__(self) -> None:
        if not self.gpus:
            raise InputError("a pool needs at least one GPU or machine type")
        seen: dict[str, str] = {}
        for g in self.gpus:
            machine = get_machine_type(g).name  # raises CatalogError on unknown names
            if machine in seen:  # two names of one machine would search it twice as if two
                raise InputError(f"{seen[machine]!r} and {g!r} name the same machine type, {machine}")
            seen[machine] = g
        lo = validate_power_cap(self.power_cap[0], "power cap")
        hi = validate_power_cap(self.power_cap[1], "power cap")
        if hi < lo:
            raise InputError(f"power-cap range must have lo ≤ hi, got {lo}:{hi}")
        object.__setattr__(self, "power_cap", (lo, hi))
        for what, values in (
            ("TP", self.tps),
            ("precision", self.precisions),
            ("KV precision", self.kv_precisions),
        ):
            if not values:
                raise InputError(f"a pool needs at least one {what} choice")
            if len(set(values)) != len(values):
                raise InputError(f"{what} choices repeat: {', '.join(map(str, values))}")
        for choice in self.instance_choices():
            instance_machine(choice, lo)  # raises InputError naming the bad combination

    def instance_choices(self) -> list[tuple[str, int | None, str, str | None]]:
        """Every (GPU/machine, TP, weight precision, KV precision) of the pool, in option order."""
        return list(itertools.product(self.gpus, self.tps, self.precisions, self.kv_precisions))

    def choice_of(
        self, gpu: str, tp: int | None, precision: str | None, kv_precision: str | None
    ) -> tuple[int | None, str, str | None]:
        """The pool's own (TP, weight precision, KV precision) choice that an instance on `gpu`
        was made from. A result records the instance resolved (TP 8, where the choice was the
        whole node's None), and rebuilding its design from the pool's first choice instead would
        describe another instance (and the deployment plan another cluster)."""
        for t, w, k in itertools.product(self.tps, self.precisions, self.kv_precisions):
            m = instance_machine((gpu, t, w, k))
            if (m.tensor_parallel, m.weight_precision.value, m.kv_precision.value) == (
                tp,
                precision,
                kv_precision,
            ):
                return t, w, k
        raise InputError(f"no instance choice of this pool is TP {tp} with {precision} weights on {gpu}")

    @property
    def has_instance_choices(self) -> bool:
        return len(self.tps) > 1 or len(self.precisions) > 1 or len(self.kv_precisions) > 1

    @property
    def dims(self) -> int:
        discrete = (self.gpus, self.tps, self.precisions, self.kv_precisions)
        return sum(int(len(c) > 1) for c in discrete) + int(self.power_cap[0] < self.power_cap[1])

    def max_instances_per_node(self) -> int:
        """Instances of the smallest choice that fit one node (1 when every choice is a whole node)."""
        return max(
            get_machine_type(g).gpus // (tp or get_machine_type(g).gpus) for g in self.gpus for tp in self.tps
        )


def instance_machine(choice: tuple[str, int | None, str, str | None], power_cap: float = 1.0) -> Machine:
    """The Machine of one instance choice; a bad combination is one line naming it and the fix."""
    gpu, tp, precision, kv = choice
    try:
        return make_instance(gpu, power_cap, tp, precision, kv)
    except InputError as exc:
        raise InputError(f"{gpu} at TP {tp or 'node'}, {precision} weights: {exc}") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class DesignSpace:
    """One design family to optimize. Baselines: `prompt_range` is the machine count range."""

    name: str
    baseline: bool
    prompt: PoolSpace
    token: PoolSpace
    prompt_range: tuple[int, int]
    token_range: tuple[int, int] = (0, 0)
    # Ranges nobody gave (no explicit range, no `max_machines`): the search may size them from a
    # capacity estimate at the target rate and widen them when the optimum sits on their edge
    # (search.ranges); a given range or cap is honoured exactly.
    auto_range: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "prompt_range", _check_range(self.prompt_range, f"{self.name} prompt"))
        if not self.baseline:
            object.__setattr__(self, "token_range", _check_range(self.token_range, f"{self.name} token"))
        else:
            object.__setattr__(self, "token_range", (0, 0))

    @property
    def count_dims(self) -> int:
        if self.baseline:
            return int(self.prompt_range[0] < self.prompt_range[1])
        return int(self.prompt_range[0] < self.prompt_range[1]) + int(
            self.token_range[0] < self.token_range[1]
        )

    @property
    def dims(self) -> int:
        pool_dims = self.prompt.dims + (0 if self.baseline else self.token.dims)
        return self.count_dims + pool_dims

    @property
    def is_fixed_pools(self) -> bool:
        return self.prompt.dims == 0 and (self.baseline or self.token.dims == 0)

    def design(
        self,
        prompt_gpu: str | None = None,
        token_gpu: str | None = None,
        prompt_cap: float | None = None,
        token_cap: float | None = None,
        *,
        prompt_instance: tuple[int | None, str, str | None] | None = None,
        token_instance: tuple[int | None, str, str | None] | None = None,
    ) -> Design:
        """The concrete Design for a choice of pool types, caps and instances (TP, weight and KV
        precision); defaults: the first choice / the lower cap."""
        pg = prompt_gpu or self.prompt.gpus[0]
        tg = token_gpu or self.token.gpus[0]
        pc = self.prompt.power_cap[0] if prompt_cap is None else prompt_cap
        tc = self.token.power_cap[0] if token_cap is None else token_cap
        pi = prompt_instance or (self.prompt.tps[0], self.prompt.precisions[0], self.prompt.kv_precisions[0])
        ti = token_instance or (self.token.tps[0], self.token.precisions[0], self.token.kv_precisions[0])
        if self.baseline:
            ti = pi
        paper_instances = all(x is None for x in (pi[0], pi[2], ti[0], ti[2])) and pi[1] == ti[1] == "fp16"
        if self.is_fixed_pools and self.name in SEARCH_DESIGNS and paper_instances:
            return get_design(self.name)
        return custom_design(
            pg,
            tg,
            pc,
            tc,
            baseline=self.baseline,
            name=self.name if self.is_fixed_pools else None,
            # a named design's batch policy (chunked prefill) survives instance options
            policy=get_design(self.name).policy if self.name in SEARCH_DESIGNS else BatchPolicy.MIXED,
            prompt_tp=pi[0],
            prompt_precision=pi[1],
            prompt_kv_precision=pi[2],
            token_tp=ti[0],
            token_precision=ti[1],
            token_kv_precision=ti[2],
        )


DEFAULT_SPLIT_RANGE = (1, 39)
DEFAULT_BASELINE_MAX = 80


def paper_space(
    name: str,
    *,
    max_machines: int | None = None,
    prompt_range: tuple[int, int] | None = None,
    token_range: tuple[int, int] | None = None,
) -> DesignSpace:
    """A DesignSpace for one of the named designs with the default (or given) ranges.

    `max_machines` sets the top of every pool's range (raising or lowering the default); with
    neither ranges nor a cap the ranges are automatic: the defaults, sized up by the search from a
    capacity estimate at the target rate (search.ranges).
    """
    d = get_design(name)
    cap = max_machines
    prompt = PoolSpace(gpus=(d.prompt.type.name,), power_cap=(d.prompt.power_cap, d.prompt.power_cap))
    token = PoolSpace(gpus=(d.token.type.name,), power_cap=(d.token.power_cap, d.token.power_cap))
    auto = cap is None and prompt_range is None and token_range is None
    if d.is_baseline:
        hi = DEFAULT_BASELINE_MAX if cap is None else cap
        pr = prompt_range or (1, hi)
        return DesignSpace(
            name=d.name,
            baseline=True,
            prompt=prompt,
            token=token,
            prompt_range=_clip(pr, cap),
            auto_range=auto,
        )
    default = DEFAULT_SPLIT_RANGE if cap is None else (1, cap)
    pr = prompt_range or default
    tr = token_range or default
    return DesignSpace(
        name=d.name,
        baseline=False,
        prompt=prompt,
        token=token,
        prompt_range=_clip(pr, cap),
        token_range=_clip(tr, cap),
        auto_range=auto,
    )


def _clip(r: tuple[int, int], cap: int | None) -> tuple[int, int]:
    if cap is None:
        return r
    if cap < 1:
        raise InputError(f"`max_machines` must be ≥ 1, got {cap}")
    return (min(r[0], cap), min(r[1], cap))


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchProblem:
    """Everything but the scenario: what to search, what to optimize, how to decide points.

    `band` is the analytic-margin band for the hybrid engine: cheaper-than-optimal points decided
    only by dominance whose analytic margin is above −band are re-checked with the DES, and for the
    throughput objective every split whose analytic rate is within (1 + band) of the best verified
    rate is bisected with the DES.
    """

    spaces: tuple[DesignSpace, ...]
    objective: Objective = Objective.COST
    rate_rps: float = 70.0
    power_budget_kw: float | None = None
    cost_budget_usd_per_h: float | None = None
    engine: Engine = Engine.HYBRID
    method: Method = Method.AUTO
    trials: int = 200
    seed: int = 0
    band: float = DEFAULT_BAND
    rate_tol: float = 0.02
    confirm_top: int = 20
    # the hybrid's strategy for a count grid: None picks by size (search.frontier.use_frontier),
    # True/False force the frontier search / the whole-grid walk (tests compare them)
    frontier: bool | None = None

    def __post_init__(self) -> None:
        if not self.spaces:
            raise InputError("nothing to search: give at least one design")
        names = [s.name for s in self.spaces]
        if len(set(names)) != len(names):
            raise InputError(f"design names must be unique, got {', '.join(names)}")
        object.__setattr__(self, "objective", parse_enum(Objective, self.objective, "objective"))
        object.__setattr__(self, "engine", parse_enum(Engine, self.engine, "engine"))
        object.__setattr__(self, "method", parse_enum(Method, self.method, "method"))
        for attr in ("power_budget_kw", "cost_budget_usd_per_h"):
            v = getattr(self, attr)
            if v is not None and not (is_number(v) and math.isfinite(v) and v > 0):
                raise InputError(f"{attr} must be a positive number, got {v!r}")
        # a number's type first: "0.3" or True must be refused by name, not fail a comparison
        if not (is_number(self.rate_rps) and math.isfinite(self.rate_rps) and self.rate_rps > 0):
            raise InputError(f"rate must be a positive number, got {self.rate_rps!r}")
        if not (isinstance(self.trials, int) and not isinstance(self.trials, bool) and self.trials >= 1):
            raise InputError(f"`trials` must be an integer ≥ 1, got {self.trials!r}")
        if not (is_number(self.band) and self.band >= 0 and math.isfinite(self.band)):
            raise InputError(f"`band` must be a number ≥ 0, got {self.band!r}")
        if not (is_number(self.rate_tol) and 0 < self.rate_tol < 1):
            raise InputError(f"rate tolerance must be in (0, 1), got {self.rate_tol!r}")

    def within_budget(self, cost_usd_per_h: float, power_kw: float) -> bool:
        return bool(self.within_budget_many(np.asarray([cost_usd_per_h]), np.asarray([power_kw]))[0])

    def within_budget_many(
        self, cost_usd_per_h: npt.NDArray[np.float64], power_kw: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.bool_]:
        """Per point: within both budgets (1e-9 slack, so a budget of exactly N machines admits N)."""
        eps = 1e-9
        ok = np.ones(np.shape(cost_usd_per_h), dtype=bool)
        if self.power_budget_kw is not None:
            ok &= np.asarray(power_kw) <= self.power_budget_kw + eps
        if self.cost_budget_usd_per_h is not None:
            ok &= np.asarray(cost_usd_per_h) <= self.cost_budget_usd_per_h + eps
        return ok

    def method_for(self, space: DesignSpace) -> Method:
        """Exhaustive grid for 1–2 dimensional spaces, Optuna beyond (unless forced)."""
        if self.method is not Method.AUTO:
            return self.method
        return Method.GRID if space.dims <= 2 else Method.OPTUNA
