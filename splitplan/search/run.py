"""Layer 5: the search driver — one context, then each design space to its strategy.

`run_search` builds the public `SearchContext` (problem, evaluator, runner, store, progress) and
hands the spaces to the peer strategy modules: `cost_grid` (cost or power over 1–2 dimensional
count grids), `throughput` (the highest rate under a budget) and `bayes` (Optuna, beyond two
dimensions). Strategies share the context and never each other.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from splitplan.search.context import SearchContext
from splitplan.search.cost_grid import solve_cost_grid
from splitplan.search.evaluate import Evaluator, Screen, ScreenVerdicts
from splitplan.search.instances import combinations, expands, merge
from splitplan.search.objective import Engine, Method, Objective
from splitplan.search.parallel import ProgressSink, Runner
from splitplan.search.problem import DesignSpace, SearchProblem
from splitplan.search.result import DesignResult, PointRecord, SearchOutcome
from splitplan.search.store import PointStore
from splitplan.search.throughput import solve_throughput_grid


class SearchInterrupted(KeyboardInterrupt):
    """Ctrl-C during a search: carries the points finished so far (already persisted if storage)."""

    def __init__(self, points: list[PointRecord], des_evaluations: int) -> None:
        super().__init__("search interrupted")
        self.points = points
        self.des_evaluations = des_evaluations


def run_search(
    problem: SearchProblem,
    evaluator: Evaluator,
    *,
    runner: Runner | None = None,
    store: PointStore | None = None,
    progress: ProgressSink | None = None,
    screens: Mapping[str, Screen] | None = None,
) -> SearchOutcome:
    """Solve `problem`; `evaluator` screens and decides points (see splitplan.search.evaluate).

    `screens`: the analytic screens of whole space grids already evaluated, by space name (at
    the target rate, in the grid's order: a heatmap's own evaluation of its grid), which the
    search reads instead of screening those grids again."""
    t0 = time.perf_counter()
    ctx = SearchContext(
        problem=problem,
        evaluator=evaluator,
        runner=runner or Runner(),
        store=store if store is not None else PointStore(),
        progress=progress,
    )
    screens = screens or {}
    unknown = sorted(set(screens) - {space.name for space in problem.spaces})
    if unknown:
        raise ValueError(f"screens of spaces the problem does not search: {', '.join(unknown)}")
    for space in problem.spaces:
        if space.name in screens:
            ctx.seed_screen(space, screens[space.name])
    results: dict[str, DesignResult] = {}
    points: list[PointRecord] = []
    try:
        expanded = {s.name: combinations(s) for s in problem.spaces if expands(problem, s)}
        bayes_spaces = [s for s in problem.spaces if uses_optuna(problem, s)]
        by_optuna = {s.name for s in bayes_spaces}
        grid_spaces = [
            sub for s in problem.spaces for sub in expanded.get(s.name, [] if s.name in by_optuna else [s])
        ]
        solve = _grid_strategy(problem)
        if grid_spaces and progress is not None and problem.engine is not Engine.ANALYTIC:
            ctx.planned_des_runs, ctx.evaluator = forecast_des_runs(ctx, grid_spaces)
            progress.add(ctx.planned_des_runs)
        if grid_spaces:
            for space, (res, pts) in zip(grid_spaces, solve(ctx, grid_spaces), strict=True):
                results[space.name] = res
                points.extend(pts)
        if bayes_spaces:
            from splitplan.search.bayes import optuna_space  # imports optuna: only when needed

            for space in bayes_spaces:
                res, pts = optuna_space(ctx, space)
                results[space.name] = res
                points.extend(pts)
        for s in problem.spaces:
            if s.name in expanded:
                results[s.name] = merge(problem, s, expanded[s.name], results, points)
        if progress is not None and ctx.des_evaluations < ctx.planned_des_runs:
            progress.add(ctx.des_evaluations - ctx.planned_des_runs)  # forecast runs not needed
    except KeyboardInterrupt:
        raise SearchInterrupted(ctx.ledger, ctx.des_evaluations) from None
    ordered = tuple(results[s.name] for s in problem.spaces)
    return SearchOutcome(
        objective=problem.objective,
        results=ordered,
        points=points,
        des_evaluations=ctx.des_evaluations,
        wall_s=time.perf_counter() - t0,
        engine=problem.engine,
    )


def uses_optuna(problem: SearchProblem, space: DesignSpace) -> bool:
    """Whether `run_search` searches `space` with Optuna trials (else with exhaustive grids: its
    own, or one per instance combination). The one rule, also asked by callers that must know
    whether `trials` takes effect."""
    return not expands(problem, space) and problem.method_for(space) is Method.OPTUNA


def _grid_strategy(problem: SearchProblem) -> Any:
    """The strategy over 1–2 dimensional count grids for the problem's objective."""
    return solve_throughput_grid if problem.objective is Objective.THROUGHPUT else solve_cost_grid


def forecast_des_runs(ctx: SearchContext, grid_spaces: list[DesignSpace]) -> tuple[int, Evaluator]:
    """The DES runs the grid strategies will make on `ctx`, forecast by running them against the
    analytic screen's verdicts (`ScreenVerdicts`) — a progress total that holds from the start.

    The forecast starts from the verdicts the store already holds, so a resumed search forecasts
    only what is left; it is exact where the DES agrees with the screen and is off by the probes a
    disagreement adds or saves (the real run raises the total if it needs more, and withdraws
    what it did not need). Returns the count and the evaluator the real run should use: `ctx`'s,
    replaying the forecast's screens (`ReplayedScreens`), so the forecast costs the strategies'
    bookkeeping and not a second set of screens.
    """
    stand_in = ScreenVerdicts(ctx.evaluator, verdicts=ctx.problem.engine is not Engine.DES)
    known = PointStore()
    for key, d in ctx.store.snapshot("").items():
        known.put(key, d)
    dry = SearchContext(
        problem=ctx.problem,
        evaluator=stand_in,
        runner=Runner(),
        store=known,
        progress=None,
        screens=ctx.screens,
    )
    _grid_strategy(ctx.problem)(dry, grid_spaces)
    return stand_in.calls, stand_in.replayed()
