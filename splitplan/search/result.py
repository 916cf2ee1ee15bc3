"""Layer 5: what a search returns — the best configuration per design and every evaluated point.

Points are plain column dicts (keys in `POINT_KEYS` + the nine SLO keys) so they cross process
boundaries cheaply and turn into a parquet table in the report layer without translation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from splitplan.design import Design, pool_fields
from splitplan.search.objective import Engine, Objective, rank_key
from splitplan.slo import SLO_KEYS

if TYPE_CHECKING:
    from splitplan.search.evaluate import Decision

DecidedBy = str  # "des" | "analytic" | "dominance"

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
    # instances (the unit a pool is counted in; `*_machines` and `machines` are whole nodes)
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


def des_record(
    space: str, design: Design, prompt: int, token: int, rate_rps: float, decision: Decision
) -> dict[str, object]:
    """The record of an in-budget point the DES decided."""
    return point_record(
        space=space,
        design=design,
        prompt=prompt,
        token=token,
        rate_rps=rate_rps,
        within_budget=True,
        des_margin=decision.margin,
        meets=decision.meets,
        decided_by="des",
        binding=decision.binding,
        slowdown=decision.slowdown,
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
    slowdown: dict[str, float] | None = None,
) -> dict[str, object]:
    baseline = design.is_baseline
    cost = design.cost_usd_per_h(prompt, token)
    power = design.power_kw(prompt, token)
    rec: dict[str, object] = {
        "design": space,
        "prompt_gpu": design.prompt.type.name,
        "token_gpu": design.token.type.name,
        "prompt_power_cap": float(design.prompt.power_cap),
        "token_power_cap": float(design.token.power_cap),
        "prompt_machines": None if baseline else design.prompt.nodes_for(prompt),
        "token_machines": None if baseline else design.token.nodes_for(token),
        "machines": design.prompt.nodes_for(prompt) + (0 if baseline else design.token.nodes_for(token)),
        "rate_rps": float(rate_rps),
        "cost_usd_per_h": float(cost),
        "power_kw": float(power),
        "within_budget": bool(within_budget),
        "analytic_margin": float(analytic_margin),
        "des_margin": float(des_margin),
        "meets_slo": bool(meets),
        "decided_by": decided_by,
        "binding_slo": binding,
        "prompt_instances": None if baseline else int(prompt),
        "token_instances": None if baseline else int(token),
        "instances": int(prompt) + (0 if baseline else int(token)),
        **pool_fields(design.prompt, "prompt"),
        **pool_fields(design.token, "token"),
    }
    sd = slowdown or {}
    for k in SLO_KEYS:
        rec[k] = float(sd.get(k, math.nan))
    return rec


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
    rec: dict[str, object], *, baseline: bool, des_evaluations: int, method: str
) -> DesignResult:
    margin = float(rec["des_margin"] if rec["decided_by"] == "des" else rec["analytic_margin"])  # type: ignore[arg-type]
    return DesignResult(
        design=str(rec["design"]),
        baseline=baseline,
        prompt_gpu=str(rec["prompt_gpu"]),
        token_gpu=str(rec["token_gpu"]),
        prompt_power_cap=float(rec["prompt_power_cap"]),  # type: ignore[arg-type]
        token_power_cap=float(rec["token_power_cap"]),  # type: ignore[arg-type]
        prompt_machines=rec["prompt_machines"],  # type: ignore[arg-type]
        token_machines=rec["token_machines"],  # type: ignore[arg-type]
        machines=int(rec["machines"]),  # type: ignore[call-overload]
        cost_usd_per_h=float(rec["cost_usd_per_h"]),  # type: ignore[arg-type]
        power_kw=float(rec["power_kw"]),  # type: ignore[arg-type]
        rate_rps=float(rec["rate_rps"]),  # type: ignore[arg-type]
        meets_slo=bool(rec["meets_slo"]),
        verified_by=str(rec["decided_by"]),
        binding_slo=str(rec["binding_slo"]) or None,
        headroom=margin,
        slowdown={k: float(rec[k]) for k in SLO_KEYS},  # type: ignore[arg-type]
        des_evaluations=des_evaluations,
        method=method,
        **{k: rec.get(k) for k in _INSTANCE_KEYS},  # type: ignore[arg-type]
    )


_INSTANCE_KEYS = POINT_KEYS[POINT_KEYS.index("prompt_instances") :]


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
    points: list[dict[str, object]]
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
