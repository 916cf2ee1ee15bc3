"""`splitplan heatmap` as a library function: one design over a (prompt, token) grid.

Engines: "analytic" evaluates every point with the vectorized evaluator (the 39×39 grid in well
under a second); "des" simulates every point; "hybrid" evaluates analytically and re-simulates with
the DES every point whose analytic SLO margin is within `band` of the limit (where the two could
disagree), so the verdicts near the frontier are the DES's.
"""

from __future__ import annotations

import logging
import math
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from splitplan.design import ClusterConfig, Design
from splitplan.errors import InputError
from splitplan.search.parallel import ProgressSink
from splitplan.sim.scenario import Scenario
from splitplan.slo import SLO_KEYS

ENGINES = ("analytic", "des", "hybrid")
DEFAULT_BAND = 0.15
MAX_POINTS = 100_000

_log = logging.getLogger(__name__)
_RANGE = re.compile(r"^\s*(\d+)\s*:\s*(\d+)\s*$")


def parse_range(text: str, what: str) -> tuple[int, int]:
    """ "A:B" (inclusive, 1 ≤ A ≤ B) → (A, B); anything else is an InputError naming the option."""
    m = _RANGE.match(str(text))
    if not m:
        raise InputError(f"--{what}-range must look like A:B with whole numbers, got {text!r}")
    lo, hi = int(m.group(1)), int(m.group(2))
    if lo < 1 or hi < lo:
        raise InputError(f"--{what}-range needs 1 ≤ A ≤ B, got {text!r}")
    return lo, hi


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
    engine: str
    prompt_values: npt.NDArray[np.int64]
    token_values: npt.NDArray[np.int64]
    prompt_machines: npt.NDArray[np.int64]
    token_machines: npt.NDArray[np.int64]
    slowdown: dict[str, npt.NDArray[np.float64]]
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

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.prompt_values), len(self.token_values)

    def grid(self, values: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """A per-point array as a (prompt, token) matrix."""
        return np.asarray(values).reshape(self.shape)

    def _best(self, key: npt.NDArray[np.float64], other: npt.NDArray[np.float64]) -> HeatmapPoint | None:
        idx = np.flatnonzero(self.meets_slo)
        if not len(idx):
            return None
        machines = self.prompt_machines + self.token_machines
        order = np.lexsort((self.prompt_machines[idx], machines[idx], other[idx], key[idx]))
        i = int(idx[order[0]])
        return HeatmapPoint(
            prompt_machines=int(self.prompt_machines[i]),
            token_machines=int(self.token_machines[i]),
            cost_usd_per_h=float(self.cost_usd_per_h[i]),
            power_kw=float(self.power_kw[i]),
        )

    @property
    def cost_optimal(self) -> HeatmapPoint | None:
        """Cheapest point meeting every SLO (ties: lower power, fewer machines)."""
        return self._best(self.cost_usd_per_h, self.power_kw)

    @property
    def power_optimal(self) -> HeatmapPoint | None:
        """Lowest-power point meeting every SLO (ties: lower cost, fewer machines)."""
        return self._best(self.power_kw, self.cost_usd_per_h)

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


def _des_rows(
    design: Design, scenario: Scenario, points: list[tuple[int, int]], progress: ProgressSink | None = None
) -> list[tuple]:
    from splitplan.sim.des import simulate_des

    rows = []
    for p, t in points:
        r = simulate_des(ClusterConfig(design=design, prompt_machines=p, token_machines=t), scenario)
        rows.append(
            (
                [r.slowdown[k] for k in SLO_KEYS],
                r.meets_slo,
                r.stable,
                r.verdict.headroom,
                r.utilization.get("prompt", math.nan),
                r.utilization.get("token", math.nan),
            )
        )
        if progress is not None:
            progress.advance(1)
    return rows


def _run_des(
    design: Design,
    scenario: Scenario,
    points: list[tuple[int, int]],
    jobs: int,
    progress: ProgressSink | None = None,
) -> list[tuple]:
    if jobs <= 1 or len(points) < 8:
        return _des_rows(design, scenario, points, progress)
    from joblib import Parallel, delayed

    n_chunks = min(len(points), 4 * jobs)
    chunks = [points[i::n_chunks] for i in range(n_chunks)]
    done = []
    for rows in Parallel(n_jobs=jobs, return_as="generator")(
        delayed(_des_rows)(design, scenario, c) for c in chunks
    ):
        done.append(rows)  # chunks come back in order; progress counts DES runs
        if progress is not None:
            progress.advance(len(rows))
    out: list[tuple] = [()] * len(points)
    for i in range(n_chunks):
        for j, row in enumerate(done[i]):
            out[i + j * n_chunks] = row
    return out


def heatmap(
    design: Design,
    scenario: Scenario,
    prompt_range: tuple[int, int] = (1, 39),
    token_range: tuple[int, int] = (1, 39),
    engine: str = "analytic",
    *,
    sample_size: int | None = None,
    band: float = DEFAULT_BAND,
    jobs: int = 1,
    progress: ProgressSink | None = None,
) -> HeatmapResult:
    """Every (prompt, token) point of one Splitwise design: nine slowdowns, verdict, cost, power.

    `progress` counts one step for the analytic screen, then one per DES run (their number is known
    once the screen has decided which points the DES re-checks)."""
    from splitplan.sim.analytic import evaluate_grid

    if engine not in ENGINES:
        raise InputError(f"unknown engine {engine!r} (expected {', '.join(ENGINES)})")
    if design.is_baseline:
        raise InputError(f"{design.name} is a baseline (one pool): a heatmap needs a Splitwise design")
    for what, (lo, hi) in (("prompt", prompt_range), ("token", token_range)):
        if not (isinstance(lo, int | np.integer) and isinstance(hi, int | np.integer) and 1 <= lo <= hi):
            raise InputError(f"--{what}-range needs whole numbers 1 ≤ A ≤ B, got {lo}:{hi}")
    if not (isinstance(jobs, int) and jobs >= 1):
        raise InputError(f"--jobs must be an integer ≥ 1, got {jobs!r}")
    if not (math.isfinite(band) and band >= 0):
        raise InputError(f"band must be a number ≥ 0, got {band!r}")
    pv = np.arange(prompt_range[0], prompt_range[1] + 1, dtype=np.int64)
    tv = np.arange(token_range[0], token_range[1] + 1, dtype=np.int64)
    if len(pv) * len(tv) > MAX_POINTS:
        raise InputError(f"the grid has {len(pv) * len(tv)} points; at most {MAX_POINTS} are allowed")
    t0 = time.perf_counter()
    P, T = (a.ravel() for a in np.meshgrid(pv, tv, indexing="ij"))
    if progress is not None:
        progress.add(1 + (len(P) if engine == "des" else 0))
    batch = evaluate_grid(design, P, T, scenario, sample_size=sample_size)
    if progress is not None:
        progress.advance(1)
    slowdown = {k: batch.slowdown[k].copy() for k in SLO_KEYS}
    meets = batch.meets_slo.copy()
    stable = batch.stable.copy()
    margin = batch.margin.copy()
    up = batch.utilization_prompt.copy()
    ut = batch.utilization_token.copy()
    decided = np.full(len(P), "analytic", dtype="<U8")
    if engine == "des":
        sel = np.arange(len(P))
    elif engine == "hybrid":
        sel = np.flatnonzero(np.abs(margin) <= band)
    else:
        sel = np.arange(0)
    _log.debug("%s: analytic screen of %d points in %.2f s", design.name, len(P), time.perf_counter() - t0)
    if progress is not None and engine == "hybrid":
        progress.add(len(sel))
    if len(sel):
        _log.debug("%s: %d points re-decided with the DES (jobs=%d)", design.name, len(sel), jobs)
        rows = _run_des(design, scenario, [(int(P[i]), int(T[i])) for i in sel], jobs, progress)
        for i, (sd, ok, st, head, u_p, u_t) in zip(sel, rows, strict=True):
            for j, k in enumerate(SLO_KEYS):
                slowdown[k][i] = sd[j]
            meets[i], stable[i] = ok, st
            margin[i] = head if math.isfinite(head) else -1e9
            up[i], ut[i] = u_p, u_t
            decided[i] = "des"
    wl = scenario.workload
    meta = {
        "design": design.name,
        "prompt_machine": design.prompt.name,
        "token_machine": design.token.name,
        "engine": engine,
        "workload": wl.name,
        "workload_meta": ";".join(f"{k}={v}" for k, v in wl.meta.items()),
        "requests": str(wl.n),
        "rate_rps": f"{wl.rate_rps:.6g}",
        "duration_s": f"{wl.duration_s:.6g}",
        "model": scenario.model.name,
        "perf": scenario.perf if scenario.perf == "analytic" else Path(scenario.perf).name,
        "seed": str(scenario.seed),
        "sample_size": str(batch.sample_size),
        "slo_slowdown": ";".join(f"{k}={v:g}" for k, v in scenario.slo.slowdown.items()),
    }
    return HeatmapResult(
        design=design,
        engine=engine,
        prompt_values=pv,
        token_values=tv,
        prompt_machines=P,
        token_machines=T,
        slowdown=slowdown,
        meets_slo=meets,
        stable=stable,
        margin=margin,
        utilization_prompt=up,
        utilization_token=ut,
        cost_usd_per_h=batch.cost_usd_per_h,
        power_kw=batch.power_kw,
        decided_by=decided,
        slo_limits=dict(scenario.slo.slowdown),
        meta=meta,
        wall_s=time.perf_counter() - t0,
        des_points=len(sel),
    )
