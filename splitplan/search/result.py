"""Layer 5: what a search returns — the best configuration per design and every evaluated point.

Every evaluated point is a typed, immutable `PointRecord`; its columnar form (`PointRecord.row`,
`point_columns`) has the public column names of `POINT_KEYS`, the nine SLO keys and the nine
latency columns, which the report layer turns into a parquet table without translation.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from splitplan.design import Design, pool_fields
from splitplan.search.objective import Engine, Objective, rank_key
from splitplan.slo import LATENCY_COLUMNS, SLO_KEYS

if TYPE_CHECKING:
    from splitplan.search.evaluate import Decision


class DecidedBy(StrEnum):
    """What decided a point's verdict (the `decided_by` column)."""

    DES = "des"  # simulated
    DOMINANCE = "dominance"  # implied by DES-decided points it dominates or is dominated by
    UNDECIDED = "undecided"  # the hybrid left it open (never an optimum)
    ANALYTIC = "analytic"  # the analytic screen alone


# instances (the unit a pool is counted in; `*_machines` and `machines` are whole nodes)
INSTANCE_KEYS: tuple[str, ...] = (
    "prompt_instances",
    "token_instances",
    "instances",
    "prompt_tp",
    "token_tp",
    "prompt_precision",
    "token_precision",
    "prompt_kv_precision",
    "token_kv_precision",
)
POINT_KEYS: tuple[str, ...] = (
    "design",
    "prompt_gpu",
    "token_gpu",
    "prompt_power_cap",
    "token_power_cap",
    "prompt_machines",
    "token_machines",
    "machines",
    "rate_rps",
    "cost_usd_per_h",
    "power_kw",
    "within_budget",
    "analytic_margin",
    "des_margin",
    "meets_slo",
    "decided_by",
    "binding_slo",
    *INSTANCE_KEYS,
    "des_stopped",
)
# every column of a point, in file order
POINT_COLUMNS: tuple[str, ...] = POINT_KEYS + SLO_KEYS + LATENCY_COLUMNS


@dataclass(frozen=True, slots=True, kw_only=True)
class PointRecord:
    """One evaluated point: the configuration, its cost and power, and the verdict that decided it.

    Counts are None where they do not apply (a baseline's pools; the cost of a point an interrupted
    search only knows by its DES verdict). `slowdown` and `latency_s` map the nine SLO keys to the
    measured percentile (slowdown ratio; seconds); a key left out was not measured.
    """

    design: str
    prompt_gpu: str
    token_gpu: str
    prompt_power_cap: float
    token_power_cap: float
    prompt_machines: int | None
    token_machines: int | None
    machines: int | None
    rate_rps: float
    cost_usd_per_h: float | None
    power_kw: float | None
    within_budget: bool | None
    analytic_margin: float = math.nan
    des_margin: float = math.nan
    meets_slo: bool
    decided_by: DecidedBy
    binding_slo: str = ""
    prompt_instances: int | None = None
    token_instances: int | None = None
    instances: int | None = None
    prompt_tp: int | None = None
    token_tp: int | None = None
    prompt_precision: str | None = None
    token_precision: str | None = None
    prompt_kv_precision: str | None = None
    token_kv_precision: str | None = None
    # the DES run stopped once `binding_slo` was certain to fail (search.frontier): des_margin and
    # the percentiles are unknown (NaN)
    des_stopped: bool = False
    slowdown: Mapping[str, float] = field(default_factory=dict)
    latency_s: Mapping[str, float] = field(default_factory=dict)

    @property
    def margin(self) -> float:
        """The SLO headroom of the verdict this point reports (the DES's where it decided)."""
        return self.des_margin if self.decided_by is DecidedBy.DES else self.analytic_margin

    def rank_key(self, objective: Objective, rate: float | None = None) -> tuple[float, ...]:
        """Where this point ranks (search.objective's one tie-break); `rate` scores throughput
        (default: the point's rate)."""
        machines = self.machines or 0
        return rank_key(
            objective,
            cost=self.cost_usd_per_h or 0.0,
            power=self.power_kw or 0.0,
            rate=self.rate_rps if rate is None else rate,
            machines=machines,
            prompt=self.prompt_machines or machines,
        )

    def row(self) -> dict[str, object]:
        """The point as one row of `POINT_COLUMNS` (NaN where a slowdown or latency is unknown)."""
        out: dict[str, object] = {k: getattr(self, k) for k in POINT_KEYS}
        out["decided_by"] = self.decided_by.value
        for k in SLO_KEYS:
            out[k] = float(self.slowdown.get(k, math.nan))
        for k, col in zip(SLO_KEYS, LATENCY_COLUMNS, strict=True):
            out[col] = float(self.latency_s.get(k, math.nan))
        return out


def point_columns(points: Iterable[PointRecord]) -> dict[str, list[object]]:
    """Points as columns (`POINT_COLUMNS` → one list each), the form parquet tables are built from."""
    rows = [p.row() for p in points]
    return {name: [r[name] for r in rows] for name in POINT_COLUMNS}


def des_record(
    space: str,
    design: Design,
    prompt: int,
    token: int,
    rate_rps: float,
    decision: Decision,
    *,
    within_budget: bool = True,
) -> PointRecord:
    """The record of a point the DES decided (in budget unless said otherwise)."""
    return point_record(
        space=space,
        design=design,
        prompt=prompt,
        token=token,
        rate_rps=rate_rps,
        within_budget=within_budget,
        des_margin=decision.measured_margin,
        meets=decision.meets,
        decided_by=DecidedBy.DES,
        binding=decision.binding,
        slowdown=decision.slowdown,
        latency_s=decision.latency_s,
        des_stopped=not decision.complete,
    )


def point_record(
    *,
    space: str,
    design: Design,
    prompt: int,
    token: int,
    rate_rps: float,
    within_budget: bool,
    analytic_margin: float = math.nan,
    des_margin: float = math.nan,
    meets: bool,
    decided_by: DecidedBy,
    binding: str = "",
    slowdown: Mapping[str, float] | None = None,
    latency_s: Mapping[str, float] | None = None,
    des_stopped: bool = False,
    cost_usd_per_h: float | None = None,
    power_kw: float | None = None,
) -> PointRecord:
    """The record of `prompt` × `token` instances of `design` (a baseline's token count is 0).

    `cost_usd_per_h`, `power_kw`: the point's, where the caller has them from the design's own
    methods over a whole grid (computed point by point, they cost a large grid's records as much
    as the rest of the records)."""
    baseline = design.is_baseline
    if cost_usd_per_h is None:
        cost_usd_per_h = float(design.cost_usd_per_h(prompt, token))
    if power_kw is None:
        power_kw = float(design.power_kw(prompt, token))
    pm = design.prompt.nodes_for(prompt)
    tm = design.token.nodes_for(token)
    return PointRecord(
        design=space,
        prompt_gpu=design.prompt.type.name,
        token_gpu=design.token.type.name,
        prompt_power_cap=float(design.prompt.power_cap),
        token_power_cap=float(design.token.power_cap),
        prompt_machines=None if baseline else pm,
        token_machines=None if baseline else tm,
        machines=pm + (0 if baseline else tm),
        rate_rps=float(rate_rps),
        cost_usd_per_h=float(cost_usd_per_h),
        power_kw=float(power_kw),
        within_budget=bool(within_budget),
        analytic_margin=float(analytic_margin),
        des_margin=float(des_margin),
        meets_slo=bool(meets),
        decided_by=DecidedBy(decided_by),
        binding_slo=binding,
        prompt_instances=None if baseline else int(prompt),
        token_instances=None if baseline else int(token),
        instances=int(prompt) + (0 if baseline else int(token)),
        prompt_tp=design.prompt.tensor_parallel,
        token_tp=design.token.tensor_parallel,
        prompt_precision=design.prompt.weight_precision.value,
        token_precision=design.token.weight_precision.value,
        prompt_kv_precision=design.prompt.kv_precision.value,
        token_kv_precision=design.token.kv_precision.value,
        des_stopped=bool(des_stopped),
        slowdown={k: float(v) for k, v in (slowdown or {}).items()},
        latency_s={k: float(v) for k, v in (latency_s or {}).items()},
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class DesignResult:
    """The best configuration of one design (nulls when none meets the SLOs)."""

    design: str
    baseline: bool
    prompt_gpu: str
    token_gpu: str
    prompt_power_cap: float
    token_power_cap: float
    prompt_machines: int | None = None
    token_machines: int | None = None
    machines: int | None = None
    cost_usd_per_h: float | None = None
    power_kw: float | None = None
    rate_rps: float | None = None
    meets_slo: bool = False
    verified_by: str | None = None
    binding_slo: str | None = None
    headroom: float | None = None
    slowdown: dict[str, float | None] = field(default_factory=dict)
    des_evaluations: int = 0
    method: str = "grid"
    # the pools' instances: counts (None for a baseline's token side), TP and precisions
    prompt_instances: int | None = None
    token_instances: int | None = None
    instances: int | None = None
    prompt_tp: int | None = None
    token_tp: int | None = None
    prompt_precision: str | None = None
    token_precision: str | None = None
    prompt_kv_precision: str | None = None
    token_kv_precision: str | None = None
    # why a design has no answer (search.ranges.explain_limits): the configuration tried that came
    # closest, its binding SLO and shortfall, and what limited the search (range, budget, memory)
    closest: dict[str, object] | None = None
    shortfall: dict[str, object] | None = None
    limited_by: str | None = None

    @property
    def instance_counts(self) -> tuple[int | None, int | None]:
        """(prompt, token) counted in instances, the unit the search's ranges and grids count in
        (`*_machines` count whole nodes; the two differ wherever an instance is less than a
        node). A baseline's is (N, None)."""
        if self.baseline:
            return (self.instances if self.instances is not None else self.machines), None
        p = self.prompt_instances if self.prompt_instances is not None else self.prompt_machines
        t = self.token_instances if self.token_instances is not None else self.token_machines
        return p, t

    def score(self, objective: Objective) -> float:
        return float(objective.score(self.cost_usd_per_h or 0.0, self.power_kw or 0.0, self.rate_rps or 0.0))

    def rank_key(self, objective: Objective) -> tuple[float, ...]:
        """Where this optimum ranks among designs: the one tie-break rule (search.objective)."""
        machines = self.machines or 0
        return rank_key(
            objective,
            cost=self.cost_usd_per_h or 0.0,
            power=self.power_kw or 0.0,
            rate=self.rate_rps or 0.0,
            machines=machines,
            prompt=machines if self.prompt_machines is None else self.prompt_machines,
        )

    def to_json(self) -> dict[str, object]:
        def clean(x: float | None) -> float | None:
            return None if x is None or not math.isfinite(x) else round(float(x), 9)

        return {
            "design": self.design,
            "prompt_machines": None if self.baseline else self.prompt_machines,
            "token_machines": None if self.baseline else self.token_machines,
            "machines": self.machines,
            "prompt_gpu": self.prompt_gpu,
            "token_gpu": self.token_gpu,
            "prompt_power_cap": self.prompt_power_cap,
            "token_power_cap": self.token_power_cap,
            "cost_usd_per_h": clean(self.cost_usd_per_h),
            "power_kw": clean(self.power_kw),
            "rate_rps": clean(self.rate_rps),
            "meets_slo": self.meets_slo,
            "verified_by": self.verified_by,
            "slowdown": {k: clean(self.slowdown.get(k)) for k in SLO_KEYS}
            if self.meets_slo
            else dict.fromkeys(SLO_KEYS),
            "binding_slo": self.binding_slo,
            "slo_headroom": clean(self.headroom),
            "des_evaluations": self.des_evaluations,
            "method": self.method,
            "prompt_instances": None if self.baseline else self.prompt_instances,
            "token_instances": None if self.baseline else self.token_instances,
            "instances": self.instances,
            "prompt_tp": self.prompt_tp,
            "token_tp": None if self.baseline else self.token_tp,
            "prompt_precision": self.prompt_precision,
            "token_precision": None if self.baseline else self.token_precision,
            "prompt_kv_precision": self.prompt_kv_precision,
            "token_kv_precision": None if self.baseline else self.token_kv_precision,
            "closest": self.closest,
            "shortfall": self.shortfall,
            "limited_by": self.limited_by,
        }


def result_from_record(
    rec: PointRecord, *, baseline: bool, des_evaluations: int, method: str
) -> DesignResult:
    """A design's best configuration from the record of its optimum."""
    return DesignResult(
        design=rec.design,
        baseline=baseline,
        prompt_gpu=rec.prompt_gpu,
        token_gpu=rec.token_gpu,
        prompt_power_cap=rec.prompt_power_cap,
        token_power_cap=rec.token_power_cap,
        prompt_machines=rec.prompt_machines,
        token_machines=rec.token_machines,
        machines=rec.machines,
        cost_usd_per_h=rec.cost_usd_per_h,
        power_kw=rec.power_kw,
        rate_rps=rec.rate_rps,
        meets_slo=rec.meets_slo,
        verified_by=rec.decided_by.value,
        binding_slo=rec.binding_slo or None,
        headroom=rec.margin,
        slowdown={k: float(rec.slowdown.get(k, math.nan)) for k in SLO_KEYS},
        des_evaluations=des_evaluations,
        method=method,
        prompt_instances=rec.prompt_instances,
        token_instances=rec.token_instances,
        instances=rec.instances,
        prompt_tp=rec.prompt_tp,
        token_tp=rec.token_tp,
        prompt_precision=rec.prompt_precision,
        token_precision=rec.token_precision,
        prompt_kv_precision=rec.prompt_kv_precision,
        token_kv_precision=rec.token_kv_precision,
    )


def empty_result(space_name: str, design: Design, *, des_evaluations: int, method: str) -> DesignResult:
    return DesignResult(
        design=space_name,
        baseline=design.is_baseline,
        prompt_gpu=design.prompt.type.name,
        token_gpu=design.token.type.name,
        prompt_power_cap=float(design.prompt.power_cap),
        token_power_cap=float(design.token.power_cap),
        des_evaluations=des_evaluations,
        method=method,
        **pool_fields(design.prompt, "prompt"),  # type: ignore[arg-type]
        **pool_fields(design.token, "token"),  # type: ignore[arg-type]
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchOutcome:
    """Per-design bests, the overall winner, every evaluated point and what it cost to decide them."""

    objective: Objective
    results: tuple[DesignResult, ...]
    points: list[PointRecord]
    des_evaluations: int
    wall_s: float
    engine: Engine
    notes: tuple[str, ...] = ()  # what the request left out or how it was read (shown to the user)

    @property
    def evaluated_points(self) -> int:
        return len(self.points)

    @property
    def best(self) -> DesignResult | None:
        ok = [r for r in self.results if r.meets_slo]
        if not ok:
            return None
        return min(ok, key=lambda r: r.rank_key(self.objective))  # the one tie-break rule

    @property
    def best_baseline(self) -> DesignResult | None:
        base = SearchOutcome(
            objective=self.objective,
            engine=self.engine,
            results=tuple(r for r in self.results if r.baseline),
            points=[],
            des_evaluations=0,
            wall_s=0.0,
        )
        return base.best

    def savings_vs_baseline(self) -> float | None:
        """Fractional saving of the winner against the best baseline (gain for throughput)."""
        best, base = self.best, self.best_baseline
        if best is None or base is None:
            return None
        if self.objective.maximize:
            return (best.rate_rps or 0.0) / (base.rate_rps or math.inf) - 1.0
        b, w = base.score(self.objective), best.score(self.objective)
        return 1.0 - w / b if b else None

    def to_json(self) -> dict[str, object]:
        best = self.best
        return {
            "objective": self.objective,
            "engine": self.engine,
            "results": [r.to_json() for r in self.results],
            "best": None if best is None else best.to_json(),
            "savings_vs_best_baseline": self.savings_vs_baseline(),
            "evaluated_points": self.evaluated_points,
            "des_evaluations": self.des_evaluations,
            "wall_s": round(self.wall_s, 6),
            "notes": list(self.notes),
        }
