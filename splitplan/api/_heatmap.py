"""`splitplan heatmap` as a library function: one design over a (prompt, token) grid.

Every point's verdict comes from the search's own machinery (`splitplan.search.run_search` on a
one-design problem, with the same `Runner`, `PointStore`, band and exactness rule), so the starred
optimum of a heatmap is the answer `splitplan search` gives on the same scenario and grid:
- "hybrid" (default): the DES finds the feasibility frontier of every prompt count, dominance
  decides the rest, and every point that could change the optimum is re-checked with the DES;
- "des": the DES decides every point;
- "analytic": the analytic evaluator alone (fast, unverified: its plot says so).
The analytic slowdowns are shown wherever the DES did not run; utilizations are always the
analytic evaluator's estimate.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from splitplan.catalog import Machine
from splitplan.design import Design, make_instance, pool_fields
from splitplan.errors import InputError
from splitplan.search import (
    DecidedBy,
    Decision,
    DesignResult,
    DesignSpace,
    PointStore,
    PoolSpace,
    Runner,
    SearchOutcome,
    SearchProblem,
    SimEvaluator,
    run_search,
)
from splitplan.search.grid import classify, make_grid
from splitplan.search.objective import Engine, Objective, parse_enum
from splitplan.search.parallel import ProgressSink
from splitplan.search.problem import DEFAULT_BAND
from splitplan.sim.scenario import Scenario
from splitplan.slo import LATENCY_COLUMNS, SLO_KEYS

ENGINES = tuple(e.value for e in Engine)
DEFAULT_ENGINE = Engine.HYBRID
MAX_POINTS = 100_000

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class HeatmapPoint:
    prompt_machines: int
    token_machines: int
    cost_usd_per_h: float
    power_kw: float

    def to_json(self) -> dict[str, object]:
        return {
            "prompt_machines": self.prompt_machines,
            "token_machines": self.token_machines,
            "cost_usd_per_h": round(self.cost_usd_per_h, 6),
            "power_kw": round(self.power_kw, 6),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class HeatmapResult:
    """Per-point arrays (row-major: prompt count outer, token count inner) and the optima."""

    design: Design
    engine: Engine
    prompt_values: npt.NDArray[np.int64]
    token_values: npt.NDArray[np.int64]
    prompt_machines: npt.NDArray[np.int64]
    token_machines: npt.NDArray[np.int64]
    slowdown: dict[str, npt.NDArray[np.float64]]
    latency_s: dict[str, npt.NDArray[np.float64]]  # SLO key → seconds per point (DES where it decided)
    meets_slo: npt.NDArray[np.bool_]
    stable: npt.NDArray[np.bool_]
    margin: npt.NDArray[np.float64]
    utilization_prompt: npt.NDArray[np.float64]
    utilization_token: npt.NDArray[np.float64]
    cost_usd_per_h: npt.NDArray[np.float64]
    power_kw: npt.NDArray[np.float64]
    decided_by: npt.NDArray[np.str_]
    slo_limits: dict[str, float]
    meta: dict[str, str]
    wall_s: float
    des_points: int
    cost_optimal: HeatmapPoint | None = None  # what `search --objective cost` answers
    power_optimal: HeatmapPoint | None = None  # what `search --objective power` answers

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.prompt_values), len(self.token_values)

    def grid(self, values: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """A per-point array as a (prompt, token) matrix."""
        return np.asarray(values).reshape(self.shape)

    def frontier(self) -> dict[int, int | None]:
        """Per prompt count, the smallest token count meeting every SLO (None: none does)."""
        m = self.grid(self.meets_slo)
        out: dict[int, int | None] = {}
        for i, p in enumerate(self.prompt_values):
            ok = np.flatnonzero(m[i])
            out[int(p)] = int(self.token_values[ok[0]]) if len(ok) else None
        return out

    def columns(self) -> dict[str, Any]:
        cols: dict[str, Any] = {
            "prompt_machines": self.prompt_machines,
            "token_machines": self.token_machines,
        }
        cols.update({k: self.slowdown[k] for k in SLO_KEYS})
        cols.update({c: self.latency_s[k] for k, c in zip(SLO_KEYS, LATENCY_COLUMNS, strict=True)})
        cols.update(
            meets_slo=self.meets_slo,
            stable=self.stable,
            margin=self.margin,
            utilization_prompt=self.utilization_prompt,
            utilization_token=self.utilization_token,
            cost_usd_per_h=self.cost_usd_per_h,
            power_kw=self.power_kw,
            engine=[str(x) for x in self.decided_by],
        )
        return cols

    def to_table(self) -> Any:
        """The parquet table (pyarrow), with provenance in its metadata."""
        from splitplan.report.heatmap import heatmap_table

        return heatmap_table(self.columns(), **self.meta)

    def write_parquet(self, path: str | Path) -> Path:
        from splitplan.report.heatmap import write_heatmap

        return write_heatmap(self.to_table(), path)

    def plot(self, path: str | Path, *, dpi: int | None = None) -> Path:
        """The 3×3 slowdown figure (PNG, SVG or PDF by extension) with the frontier and optima."""
        from splitplan.report.plot import DEFAULT_DPI, plot_heatmap

        co, po = self.cost_optimal, self.power_optimal
        m = self.meta
        title = (
            f"{self.design.name} ({self.design.prompt.name} prompt, {self.design.token.name} token) — "
            f"{m['workload']} at {float(m['rate_rps']):.1f} req/s, {m['model']}, engine {self.engine}"
            + (", unverified" if self.engine is Engine.ANALYTIC else "")
        )
        return plot_heatmap(
            path,
            prompt_values=self.prompt_values,
            token_values=self.token_values,
            slowdown={k: self.grid(v) for k, v in self.slowdown.items()},
            meets_slo=self.grid(self.meets_slo),
            limits=self.slo_limits,
            cost_optimal=None if co is None else (co.prompt_machines, co.token_machines),
            power_optimal=None if po is None else (po.prompt_machines, po.token_machines),
            title=title,
            dpi=DEFAULT_DPI if dpi is None else dpi,
        )

    def to_json(self) -> dict[str, object]:
        co, po = self.cost_optimal, self.power_optimal
        return {
            "design": self.design.name,
            "engine": self.engine,
            # counts below are instances of each pool (whole nodes for whole-node instances)
            **pool_fields(self.design.prompt, "prompt"),
            **pool_fields(self.design.token, "token"),
            "prompt_range": [int(self.prompt_values[0]), int(self.prompt_values[-1])],
            "token_range": [int(self.token_values[0]), int(self.token_values[-1])],
            "points": len(self.prompt_machines),
            "feasible": int(self.meets_slo.sum()),
            "des_points": self.des_points,
            "cost_optimal": None if co is None else co.to_json(),
            "power_optimal": None if po is None else po.to_json(),
            "frontier": [{"prompt_machines": p, "token_machines": t} for p, t in self.frontier().items()],
            "wall_s": round(self.wall_s, 6),
        }


def _point(res: DesignResult) -> HeatmapPoint | None:
    """The optimum on the grid's own axes: instance counts (a result's `*_machines` count nodes,
    which differ wherever an instance is less than a node)."""
    prompt, token = res.instance_counts
    if not res.meets_slo or prompt is None or token is None:
        return None
    return HeatmapPoint(
        prompt_machines=int(prompt),
        token_machines=int(token),
        cost_usd_per_h=float(res.cost_usd_per_h or 0.0),
        power_kw=float(res.power_kw or 0.0),
    )


def _space(design: Design, prompt_range: tuple[int, int], token_range: tuple[int, int]) -> DesignSpace:
    """The one-design search space whose `design()` is `design` itself."""
    space = DesignSpace(
        name=design.name,
        baseline=False,
        prompt=_pool_of(design.prompt),
        token=_pool_of(design.token),
        prompt_range=prompt_range,
        token_range=token_range,
    )
    if space.design() != design:
        raise InputError(f"design {design.name!r} is not the design of that name; give it another name")
    return space


def _pool_of(machine: Machine) -> PoolSpace:
    """The fixed pool of one instance: its GPU, cap, TP and precisions (a KV precision that follows
    the weights stays implicit, so a paper design's space is that design)."""
    weights = machine.weight_precision.value
    follows = make_instance(machine.type.name, machine.power_cap, machine.tp, weights, None) == machine
    return PoolSpace(
        gpus=(machine.type.name,),
        power_cap=(machine.power_cap,) * 2,
        tps=(machine.tp,),
        precisions=(weights,),
        kv_precisions=(None if follows else machine.kv_precision.value,),
    )


def _des_decisions(outcomes: list[SearchOutcome]) -> dict[tuple[int, int], Decision]:
    """Every DES verdict the searches used, by (prompt, token)."""
    decided: dict[tuple[int, int], Decision] = {}
    for outcome in outcomes:
        for rec in outcome.points:
            if rec.decided_by is not DecidedBy.DES:
                continue
            key = (int(rec.prompt_instances or 0), int(rec.token_instances or 0))
            decided[key] = Decision(
                meets=rec.meets_slo,
                margin=rec.des_margin,
                binding=rec.binding_slo,
                slowdown=dict(rec.slowdown),
                latency_s=dict(rec.latency_s),
            )
    return decided


def heatmap(
    design: Design,
    scenario: Scenario,
    prompt_range: tuple[int, int] = (1, 39),
    token_range: tuple[int, int] = (1, 39),
    engine: Engine | str = DEFAULT_ENGINE,
    *,
    sample_size: int | None = None,
    band: float = DEFAULT_BAND,
    jobs: int = 1,
    runner: Runner | None = None,
    store: PointStore | None = None,
    progress: ProgressSink | None = None,
) -> HeatmapResult:
    """Every (prompt, token) point of one Splitwise design: nine slowdowns, verdict, cost, power.

    `runner` and `store` are the search's (parallel workers; finished DES verdicts, shared with a
    search or another heatmap on the same scenario); `jobs` makes a local runner when none is given.
    `progress` counts one step for the analytic screen, then one per DES run as each finishes (the
    search forecasts its runs at the start: exact for the DES engine, the screen's forecast for the
    hybrid, whose total grows only by the runs the DES's disagreements add).
    """
    from splitplan.sim.analytic import check_modelled, evaluate_grid

    eng = parse_enum(Engine, engine, "engine")
    if eng is Engine.ANALYTIC:
        check_modelled(design, scenario)
    if design.is_baseline:
        raise InputError(f"{design.name} is a baseline (one pool): a heatmap needs a Splitwise design")
    for what, (lo, hi) in (("prompt_range", prompt_range), ("token_range", token_range)):
        if not (isinstance(lo, int | np.integer) and isinstance(hi, int | np.integer) and 1 <= lo <= hi):
            raise InputError(f"`{what}` needs whole numbers 1 ≤ A ≤ B, got {lo}:{hi}")
    if not (isinstance(jobs, int) and jobs >= 1):
        raise InputError(f"`jobs` must be an integer ≥ 1, got {jobs!r}")
    if not (math.isfinite(band) and band >= 0):
        raise InputError(f"`band` must be a number ≥ 0, got {band!r}")
    pr = (int(prompt_range[0]), int(prompt_range[1]))
    tr = (int(token_range[0]), int(token_range[1]))
    grid = make_grid(pr, tr, baseline=False)
    pv, tv = grid.p_values, grid.t_values
    if len(pv) * len(tv) > MAX_POINTS:
        raise InputError(f"the grid has {len(pv) * len(tv)} points; at most {MAX_POINTS} are allowed")
    t0 = time.perf_counter()
    P, T = grid.flat
    if progress is not None:
        progress.add(1)
    batch = evaluate_grid(design, P, T, scenario, sample_size=sample_size)
    if progress is not None:
        progress.advance(1)
    _log.debug("%s: analytic screen of %d points in %.2f s", design.name, len(P), time.perf_counter() - t0)
    space = _space(design, pr, tr)
    evaluator = SimEvaluator(scenario, sample_size=sample_size)
    screens = {space.name: evaluator.screen_of(batch)}  # both searches read it: no second screen
    runner = runner or Runner(jobs=jobs)
    own_store = store is None
    store = PointStore() if store is None else store
    _log.debug("%s: %s engine over %d points (jobs=%d)", design.name, eng.value, len(P), runner.workers)
    outcomes = []
    try:
        for objective in (Objective.COST, Objective.POWER):
            problem = SearchProblem(
                spaces=(space,),
                objective=objective,
                rate_rps=float(scenario.workload.offered_rate_rps),
                engine=eng,
                band=band,
                frontier=False,  # a heatmap shows every point of its grid
            )
            outcomes.append(
                run_search(problem, evaluator, runner=runner, store=store, progress=progress, screens=screens)
            )
    finally:
        if own_store:
            store.close()

    slowdown = {k: batch.slowdown[k].copy() for k in SLO_KEYS}
    latency = {k: np.asarray(batch.latency_s[k], dtype=np.float64).copy() for k in SLO_KEYS}
    meets = batch.meets_slo.copy()
    stable = batch.stable.copy()
    margin = batch.margin.copy()
    decided_by = np.full(len(P), "analytic", dtype="<U9")
    decided = _des_decisions(outcomes)
    if eng is not Engine.ANALYTIC:
        ok2, how2 = classify(grid, decided)
        ok, how = ok2.ravel(), how2.ravel()
        dom = how == 1
        meets[dom] = ok[dom]
        decided_by[dom] = "dominance"
        for i, (p, t) in enumerate(zip(P.tolist(), T.tolist(), strict=True)):
            d = decided.get((p, t))
            if d is None:
                continue
            for k in SLO_KEYS:
                slowdown[k][i] = d.slowdown[k]
                latency[k][i] = d.latency_s.get(k, math.nan)
            meets[i] = d.meets
            stable[i] = d.margin > -math.inf
            margin[i] = d.margin
            decided_by[i] = "des"
    wl = scenario.workload
    meta = {
        "design": design.name,
        "prompt_machine": design.prompt.name,
        "token_machine": design.token.name,
        "engine": eng.value,
        "workload": wl.name,
        "workload_meta": ";".join(f"{k}={v}" for k, v in wl.meta.items()),
        "requests": str(wl.n),
        "rate_rps": f"{wl.offered_rate_rps:.6g}",
        "duration_s": f"{wl.duration_s:.6g}",
        "model": scenario.model.name,
        "perf": scenario.perf if scenario.perf == "analytic" else Path(scenario.perf).name,
        "seed": str(scenario.seed),
        "sample_size": str(batch.sample_size),
        "band": f"{band:g}",
        "slo_slowdown": ";".join(f"{k}={v:g}" for k, v in scenario.slo.slowdown.items()),
    }
    return HeatmapResult(
        design=design,
        engine=eng,
        prompt_values=pv,
        token_values=tv,
        prompt_machines=P,
        token_machines=T,
        slowdown=slowdown,
        latency_s=latency,
        meets_slo=meets,
        stable=stable,
        margin=margin,
        utilization_prompt=batch.utilization_prompt.copy(),
        utilization_token=batch.utilization_token.copy(),
        cost_usd_per_h=batch.cost_usd_per_h,
        power_kw=batch.power_kw,
        decided_by=decided_by,
        slo_limits=dict(scenario.slo.slowdown),
        meta=meta,
        wall_s=time.perf_counter() - t0,
        des_points=int(np.count_nonzero(decided_by == "des")),
        cost_optimal=_point(outcomes[0].results[0]),
        power_optimal=_point(outcomes[1].results[0]),
    )
