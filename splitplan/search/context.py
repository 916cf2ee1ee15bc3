"""Layer 5: the search context — what every strategy shares while it solves one problem.

The context is to the strategies (`cost_grid`, `throughput`, `bayes`) what an Optuna study is to
its samplers: it holds the problem, the evaluator, where tasks run (`Runner`), the finished DES
verdicts (`PointStore`) and the ledger of every verdict this run made, and it offers the common
preamble of a grid strategy (`space_grid`: a space's design, count grid, cost, power, budget mask
and the one tie-break). Strategies import it; it imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from splitplan.design import Design
from splitplan.search.evaluate import Decision, Evaluator, Screen
from splitplan.search.grid import CachedEvaluator, Grid, PointKey, make_grid
from splitplan.search.objective import Objective, best_index
from splitplan.search.parallel import ProgressSink, Runner
from splitplan.search.problem import DesignSpace, SearchProblem
from splitplan.search.result import DecidedBy, PointRecord
from splitplan.search.store import PointStore

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def call(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)`: the one top-level task function every strategy hands to `Runner.map`."""
    return fn(*args)


@dataclass(frozen=True, slots=True)
class SpaceGrid:
    """One design space's count grid with the cost, power and budget verdict of every point."""

    space: DesignSpace
    design: Design
    grid: Grid
    p: IntArray  # flat, (p, t) row-major
    t: IntArray  # 0 for baselines
    cost: FloatArray
    power: FloatArray
    within_budget: BoolArray

    @property
    def machines(self) -> IntArray:
        return self.p + self.t

    def score(self, objective: Objective) -> FloatArray:
        """The objective's value per point (cost or power; throughput grids score rates)."""
        return objective.score(self.cost, self.power, np.zeros(len(self.p)))

    def best(self, objective: Objective, ok: BoolArray, rate: FloatArray | None = None) -> int | None:
        """The best in-budget point among `ok` (flat index), by the one tie-break rule."""
        return best_index(
            objective,
            ok & self.within_budget,
            cost=self.cost,
            power=self.power,
            rate=rate,
            machines=self.machines,
            prompt=self.p,
        )


@dataclass(slots=True)
class SearchContext:
    """A search in progress: problem, evaluator, runner, store, progress, and the DES ledger."""

    problem: SearchProblem
    evaluator: Evaluator
    runner: Runner
    store: PointStore
    progress: ProgressSink | None
    des_evaluations: int = 0
    # the DES runs the progress total was given at the start (`run_search`'s forecast); runs beyond
    # it raise the total one by one
    planned_des_runs: int = 0
    ledger: list[PointRecord] = field(default_factory=list)
    # the verdict recorded per key and its row in the ledger: a stopped run simulated again to
    # the end or to a lower bound replaces its verdict (`Decision.refines`: the closest miss of a
    # design with none, a cliff the frontier search must tell)
    recorded: dict[PointKey, Decision] = field(default_factory=dict)
    ledger_row: dict[PointKey, int] = field(default_factory=dict)
    # the analytic screen of each space's whole grid, computed once (the range estimate and the
    # whole-grid strategy both read it)
    screens: dict[tuple[str, tuple[int, int], tuple[int, int]], Screen] = field(default_factory=dict)

    def grid_screen(self, sg: SpaceGrid) -> Screen:
        """The analytic screen of every point of `sg` at the target rate (cached per space and range)."""
        key = (sg.space.name, sg.space.prompt_range, sg.space.token_range)
        if key not in self.screens:
            self.screens[key] = self.evaluator.screen(sg.design, sg.p, sg.t, 1.0)
        return self.screens[key]

    def seed_screen(self, space: DesignSpace, screen: Screen) -> None:
        """`grid_screen`'s answer for `space`'s whole grid, evaluated by the caller (run_search's
        `screens`): one point per grid point, in the grid's order."""
        grid = make_grid(space.prompt_range, space.token_range, space.baseline)
        if len(screen.margin) != grid.shape[0] * grid.shape[1]:
            raise ValueError(
                f"a screen of {len(screen.margin)} points for {space.name}'s grid of {grid.shape}"
            )
        self.screens[(space.name, space.prompt_range, space.token_range)] = screen

    def cached(self, space: str, stop_below_headroom: float | None = None) -> CachedEvaluator:
        """The evaluator a task of `space` uses: known verdicts served, new ones recorded; DES runs
        stop once certain to fail below `stop_below_headroom` (None: they run to the end)."""
        known = self.store.snapshot(space + "|")
        # in-process, each verdict is persisted the moment it exists; workers report per task
        sink = self.record if self.runner.in_process else None
        return CachedEvaluator(
            inner=self.evaluator,
            space=space,
            known=known,
            sink=sink,
            stop_below_headroom=stop_below_headroom,
        )

    def record(self, key: PointKey, d: Decision) -> None:
        if key in self.recorded and not d.refines(self.recorded[key]):
            return
        self.recorded[key] = d
        self.store.put(key.encoded(), d)
        self.des_evaluations += 1
        row = ledger_record(key, d, self.problem.rate_rps)
        if key in self.ledger_row:
            self.ledger[self.ledger_row[key]] = row
        else:
            self.ledger_row[key] = len(self.ledger)
            self.ledger.append(row)
        if self.progress is not None:
            if self.des_evaluations > self.planned_des_runs:
                self.progress.add(1)
            self.progress.advance(1)

    def absorb(self, fresh: dict[PointKey, Decision]) -> None:
        for k, d in fresh.items():
            self.record(k, d)

    def map(
        self, fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]], fresh_of: Callable[[Any], Any]
    ) -> list[Any]:
        """Run tasks on the runner; each result's new DES verdicts are recorded (and counted by the
        progress) as it arrives — in-process, each run the moment it ends."""
        return self.runner.map(fn, tasks, on_result=lambda _i, res: self.absorb(fresh_of(res)))

    def space_grid(self, space: DesignSpace) -> SpaceGrid:
        """The preamble of every grid strategy: design, grid, cost, power and budget per point."""
        design = space.design()
        grid = make_grid(space.prompt_range, space.token_range, space.baseline)
        p, t = grid.flat
        cost = np.asarray(design.cost_usd_per_h(p, t), dtype=np.float64)
        power = np.asarray(design.power_kw(p, t), dtype=np.float64)
        ok = self.problem.within_budget_many(cost, power)
        return SpaceGrid(
            space=space, design=design, grid=grid, p=p, t=t, cost=cost, power=power, within_budget=ok
        )


def ledger_record(key: PointKey, d: Decision, rate_rps: float) -> PointRecord:
    """The record of one DES verdict (what an interrupted search writes with `--out`): the point's
    identity and verdict; its cost and budget are left unknown (null)."""
    return PointRecord(
        design=key.space,
        prompt_gpu=key.prompt_gpu,
        token_gpu=key.token_gpu,
        prompt_power_cap=key.prompt_power_cap,
        token_power_cap=key.token_power_cap,
        prompt_machines=key.prompt_machines,
        token_machines=key.token_machines,
        machines=None,
        rate_rps=key.rate_factor * rate_rps,
        cost_usd_per_h=None,
        power_kw=None,
        within_budget=None,
        des_margin=d.measured_margin,
        meets_slo=d.meets,
        decided_by=DecidedBy.DES,
        binding_slo=d.binding,
        slowdown=dict(d.slowdown),
        latency_s=dict(d.latency_s),
        des_stopped=not d.complete,
    )


__all__ = ["SearchContext", "SpaceGrid", "call", "ledger_record"]
