"""Layer 5: the search driver — stages of analytic screening and DES decisions over every design.

Stages run across all designs at once so parallel workers stay busy: (1) analytic screens in this
process, (2) one task per design column block (hybrid walks) or per chunk of points (exhaustive
DES), (3) the hybrid's verification pass, (4) the per-design optimum. Optuna spaces run their
ask/tell loop here and send DES confirmations to the workers.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from splitplan.design import Design
from splitplan.search.evaluate import Decision, Evaluator, Screen
from splitplan.search.grid import (
    CachedEvaluator,
    Grid,
    baseline_guess,
    best_index,
    classify,
    decide_points,
    guesses_for,
    make_grid,
    near_miss_only,
    objective_values,
    verify_candidates,
    walk_columns,
    walk_line,
)
from splitplan.search.instances import combinations, expands, merge
from splitplan.search.parallel import ProgressSink, Runner, chunks
from splitplan.search.problem import DesignSpace, SearchProblem
from splitplan.search.result import (
    DesignResult,
    SearchOutcome,
    des_record,
    empty_result,
    point_record,
    result_from_record,
)
from splitplan.search.store import PointStore
from splitplan.search.throughput import analytic_rates, bisect_many, maximal_splits

WALK_BLOCKS = 2  # column blocks per Splitwise design in the hybrid walk (parallel tasks)


class SearchInterrupted(KeyboardInterrupt):
    """Ctrl-C during a search: carries the points finished so far (already persisted if storage)."""

    def __init__(self, points: list[dict[str, object]], des_evaluations: int) -> None:
        super().__init__("search interrupted")
        self.points = points
        self.des_evaluations = des_evaluations


@dataclass(slots=True)
class _Ctx:
    problem: SearchProblem
    evaluator: Evaluator
    runner: Runner
    store: PointStore
    progress: ProgressSink | None
    des_evaluations: int = 0
    ledger: list[dict[str, object]] = field(default_factory=list)
    recorded: set[str] = field(default_factory=set)

    def cached(self, space: str) -> CachedEvaluator:
        known = self.store.snapshot(space + "|")
        # in-process, each verdict is persisted the moment it exists; workers report per task
        sink = self.record if self.runner.in_process else None
        return CachedEvaluator(inner=self.evaluator, space=space, known=known, sink=sink)

    def record(self, key: str, d: Decision) -> None:
        if key in self.recorded:
            return
        self.recorded.add(key)
        self.store.put(key, d)
        self.des_evaluations += 1
        self.ledger.append(_ledger_record(key, d, self.problem.rate_rps))

    def absorb(self, fresh: dict[str, Decision]) -> None:
        for k, d in fresh.items():
            self.record(k, d)

    def map(self, fn: Any, tasks: list[tuple[Any, ...]], fresh_of: Any) -> list[Any]:
        return self.runner.map(
            fn, tasks, progress=self.progress, on_result=lambda _i, res: self.absorb(fresh_of(res))
        )


def _ledger_record(key: str, d: Decision, rate_rps: float) -> dict[str, object]:
    space, pg, tg, pc, tc, p, t, f = key.split("|")
    rec: dict[str, object] = {
        "design": space,
        "prompt_gpu": pg,
        "token_gpu": tg,
        "prompt_power_cap": float(pc),
        "token_power_cap": float(tc),
        "prompt_machines": int(p),
        "token_machines": int(t),
        "rate_rps": float(f) * rate_rps,
        "des_margin": d.margin,
        "meets_slo": d.meets,
        "decided_by": "des",
        "binding_slo": d.binding,
    }
    rec.update(d.slowdown)
    return rec


def run_search(
    problem: SearchProblem,
    evaluator: Evaluator,
    *,
    runner: Runner | None = None,
    store: PointStore | None = None,
    progress: ProgressSink | None = None,
) -> SearchOutcome:
    """Solve `problem`; `evaluator` screens and decides points (see splitplan.search.evaluate)."""
    t0 = time.perf_counter()
    ctx = _Ctx(
        problem=problem,
        evaluator=evaluator,
        runner=runner or Runner(),
        store=store if store is not None else PointStore(),
        progress=progress,
    )
    results: dict[str, DesignResult] = {}
    points: list[dict[str, object]] = []
    try:
        expanded = {s.name: combinations(s) for s in problem.spaces if expands(problem, s)}
        grid_spaces = [
            sub
            for s in problem.spaces
            for sub in expanded.get(s.name, [s] if problem.method_for(s) == "grid" else [])
        ]
        bayes_spaces = [
            s for s in problem.spaces if s.name not in expanded and problem.method_for(s) == "optuna"
        ]
        if grid_spaces and problem.objective == "throughput":
            _throughput_grid(ctx, grid_spaces, results, points)
        elif grid_spaces:
            _cost_grid(ctx, grid_spaces, results, points)
        if bayes_spaces:
            from splitplan.search.bayes import optuna_space

            for space in bayes_spaces:
                res, pts = optuna_space(ctx, space)
                results[space.name] = res
                points.extend(pts)
        for s in problem.spaces:
            if s.name in expanded:
                results[s.name] = merge(problem, s, expanded[s.name], results, points)
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


# ---------------------------------------------------------------- cost / power over the count grid


@dataclass(slots=True)
class _GridState:
    space: DesignSpace
    design: Design
    grid: Grid
    screen: Screen | None
    decided: dict[tuple[int, int], Decision] = field(default_factory=dict)


def _screen(ctx: _Ctx, design: Design, grid: Grid) -> Screen | None:
    if ctx.problem.engine == "des":
        return None
    p, t = grid.flat
    return ctx.evaluator.screen(design, p, t, 1.0)


def _cost_grid(
    ctx: _Ctx, spaces: list[DesignSpace], results: dict[str, DesignResult], points: list[dict[str, object]]
) -> None:
    pb = ctx.problem
    states = []
    for space in spaces:
        design = space.design()
        grid = make_grid(space.prompt_range, space.token_range, space.baseline)
        states.append(_GridState(space=space, design=design, grid=grid, screen=_screen(ctx, design, grid)))

    if pb.engine != "analytic":
        tasks: list[tuple[Any, ...]] = []
        owners: list[_GridState] = []
        if pb.engine == "hybrid":
            for st in states:
                if st.space.baseline:
                    tasks.append(
                        (
                            walk_line,
                            ctx.cached(st.space.name),
                            st.design,
                            st.space.prompt_range,
                            baseline_guess(st.grid, st.screen),
                            1.0,
                        )
                    )
                    owners.append(st)
                    continue
                guesses = guesses_for(st.grid, st.screen)
                ps = [int(v) for v in st.grid.p_values]
                # a fixed number of column blocks (not tied to --jobs) keeps the evaluated points,
                # and so the output, identical whatever the worker count
                for block in chunks(list(zip(ps, guesses, strict=True)), WALK_BLOCKS):
                    tasks.append(
                        (
                            walk_columns,
                            ctx.cached(st.space.name),
                            st.design,
                            [b[0] for b in block],
                            st.space.token_range,
                            [b[1] for b in block],
                            1.0,
                        )
                    )
                    owners.append(st)
        else:
            _add_point_tasks(
                ctx,
                states,
                {id(s): list(zip(*map(list, s.grid.flat), strict=True)) for s in states},
                tasks,
                owners,
            )
        outs = ctx.map(_call, tasks, lambda res: res[1])
        for st, (seen, _fresh) in zip(owners, outs, strict=True):
            st.decided.update(seen)

    if pb.engine == "hybrid":
        _verify(ctx, states)
    for st in states:
        res, pts = _finish_grid(ctx, st)
        results[st.space.name] = res
        points.extend(pts)


VERIFY_ROUNDS = 3


def _verify(ctx: _Ctx, states: list[_GridState]) -> None:
    """The hybrid's guard, for every design in one parallel batch per round: DES-check undecided
    points and dominance-infeasible points cheaper than the optimum within the analytic band or
    dominated only by near misses."""
    pb = ctx.problem
    for _ in range(VERIFY_ROUNDS):
        todo: dict[int, list[tuple[int, int]]] = {}
        for st in states:
            p, t = st.grid.flat
            obj, cost, power = objective_values(st.design, p, t, pb.objective)
            ok_budget = np.array([pb.within_budget(c, w) for c, w in zip(cost, power, strict=True)])
            meets2, how2 = classify(st.grid, st.decided)
            meets, how = meets2.ravel(), how2.ravel()
            machines = p + (0 if st.space.baseline else t)
            bi = best_index(meets & (how != 2), ok_budget, obj, machines, p)
            best_obj = obj[bi] if bi is not None else math.inf
            margin = st.screen.margin if st.screen is not None else np.full(len(p), math.inf)
            idx = verify_candidates(
                how,
                meets,
                ok_budget,
                obj,
                np.nan_to_num(margin, nan=math.inf),
                best_obj,
                pb.band,
                near_miss_only(st.grid, st.decided),
            )
            if len(idx):
                todo[id(st)] = [(int(p[i]), int(t[i])) for i in idx]
        if not todo:
            return
        tasks: list[tuple[Any, ...]] = []
        owners: list[_GridState] = []
        _add_point_tasks(ctx, states, todo, tasks, owners)
        for st, (seen, _fresh) in zip(owners, ctx.map(_call, tasks, lambda res: res[1]), strict=True):
            st.decided.update(seen)


def _call(fn: Any, *args: Any) -> Any:
    return fn(*args)


def _add_point_tasks(
    ctx: _Ctx,
    states: list[_GridState],
    todo: dict[int, list[tuple[int, int]]],
    tasks: list[tuple[Any, ...]],
    owners: list[_GridState],
) -> None:
    """Chunks of points per design: a few per worker, so progress moves and loads balance."""
    total = sum(len(v) for v in todo.values())
    if not total:
        return
    per_chunk = max(8, math.ceil(total / (4 * ctx.runner.workers)))
    for st in states:
        pts = todo.get(id(st), [])
        for block in chunks(pts, max(1, math.ceil(len(pts) / per_chunk))):
            tasks.append((decide_points, ctx.cached(st.space.name), st.design, block, 1.0))
            owners.append(st)


def _finish_grid(ctx: _Ctx, st: _GridState) -> tuple[DesignResult, list[dict[str, object]]]:
    pb = ctx.problem
    p, t = st.grid.flat
    obj, cost, power = objective_values(st.design, p, t, pb.objective)
    ok_budget = np.array([pb.within_budget(c, w) for c, w in zip(cost, power, strict=True)], dtype=bool)
    machines = p + (0 if st.space.baseline else t)
    margin = st.screen.margin if st.screen is not None else np.full(len(p), np.nan)
    method = "grid"

    if pb.engine == "analytic":
        meets = margin >= 0
        how = np.full(len(p), 3)
    else:
        # a DES-decided point keeps its own verdict even where dominance would disagree
        meets2, how2 = classify(st.grid, st.decided)
        meets, how = meets2.ravel(), how2.ravel()
    how_name = np.array(["des", "dominance", "undecided", "analytic"])[how]
    records = []
    for i in range(len(p)):
        d = st.decided.get((int(p[i]), int(t[i])))
        sd = (
            d.slowdown
            if d is not None
            else ({k: float(v[i]) for k, v in st.screen.slowdown.items()} if st.screen is not None else None)
        )
        records.append(
            point_record(
                space=st.space.name,
                design=st.design,
                prompt=int(p[i]),
                token=int(t[i]),
                rate_rps=pb.rate_rps,
                within_budget=bool(ok_budget[i]),
                analytic_margin=float(margin[i]),
                des_margin=d.margin if d is not None else math.nan,
                meets=bool(meets[i]),
                decided_by=str(how_name[i]),
                binding=d.binding if d is not None else "",
                slowdown=sd,
            )
        )
    n_des = len(st.decided)
    bi = best_index(meets & (how != 2), ok_budget, obj, machines, p)
    if bi is None:
        return empty_result(st.space.name, st.design, des_evaluations=n_des, method=method), records
    rec = records[bi]
    if rec["decided_by"] == "analytic" and st.screen is not None:
        rec["binding_slo"] = _binding(st.screen, bi)
    return result_from_record(rec, baseline=st.space.baseline, des_evaluations=n_des, method=method), records


def _binding(screen: Screen, i: int) -> str:
    return str(screen.binding[i]) if screen.binding is not None else ""


# ---------------------------------------------------------------- throughput under a budget


def _throughput_grid(
    ctx: _Ctx, spaces: list[DesignSpace], results: dict[str, DesignResult], points: list[dict[str, object]]
) -> None:
    pb = ctx.problem
    plans = []
    for space in spaces:
        design = space.design()
        grid = make_grid(space.prompt_range, space.token_range, space.baseline)
        p, t = grid.flat
        _, cost, power = objective_values(design, p, t, "cost")
        ok = np.array([pb.within_budget(c, w) for c, w in zip(cost, power, strict=True)]).reshape(grid.shape)
        splits = maximal_splits(grid.p_values, grid.t_values, ok)
        rates = (
            analytic_rates(ctx.evaluator, design, splits, pb.rate_tol)
            if pb.engine != "des"
            else np.ones(len(splits))
        )
        plans.append((space, design, splits, rates))

    des_rate: dict[tuple[str, tuple[int, int]], tuple[float, Decision | None, dict[float, Decision]]] = {}
    if pb.engine != "analytic":
        # round 1: the analytically best split of every design (every split for the exhaustive engine)
        pending: list[tuple[int, list[int]]] = []
        for k, (_space, _design, splits, rates) in enumerate(plans):
            if not splits:
                continue
            if pb.engine == "des":
                pending.append((k, list(range(len(splits)))))
            else:
                order = np.argsort(-rates, kind="stable")
                pending.append((k, [int(order[0])]))
        while pending:
            _bisect_round(ctx, plans, pending, des_rate)
            pending = []
            if pb.engine == "hybrid":
                for k, (space, _design, splits, rates) in enumerate(plans):
                    best = max(
                        (des_rate[(space.name, s)][0] for s in splits if (space.name, s) in des_rate),
                        default=0.0,
                    )
                    more = [
                        i
                        for i, s in enumerate(splits)
                        if (space.name, s) not in des_rate and rates[i] * (1 + pb.band) >= best
                    ]
                    if more:
                        pending.append((k, more))

    for space, design, splits, rates in plans:
        recs: list[dict[str, object]] = []
        best_i, best_key = None, (-1.0, 0.0, 0.0)
        for i, s in enumerate(splits):
            if (space.name, s) in des_rate:
                f, _d, probes = des_rate[(space.name, s)]
                for fp, dp in sorted(probes.items()):
                    rec = des_record(space.name, design, s[0], s[1], fp * pb.rate_rps, dp)
                    recs.append(rec)
                    if f > 0 and fp == f:
                        key = (f, -float(rec["cost_usd_per_h"]), -float(rec["power_kw"]))  # type: ignore[arg-type]
                        if key > best_key:
                            best_i, best_key = len(recs) - 1, key
            else:
                f = float(rates[i])
                rec = point_record(
                    space=space.name,
                    design=design,
                    prompt=s[0],
                    token=s[1],
                    rate_rps=f * pb.rate_rps,
                    within_budget=True,
                    meets=f > 0,
                    decided_by="analytic",
                )
                recs.append(rec)
                key = (f, -float(rec["cost_usd_per_h"]), -float(rec["power_kw"]))  # type: ignore[arg-type]
                if pb.engine == "analytic" and f > 0 and key > best_key:
                    best_i, best_key = len(recs) - 1, key
        n_des = sum(len(v[2]) for (name, _s), v in des_rate.items() if name == space.name)
        if best_i is None:
            results[space.name] = empty_result(space.name, design, des_evaluations=n_des, method="grid")
        else:
            results[space.name] = result_from_record(
                recs[best_i], baseline=space.baseline, des_evaluations=n_des, method="grid"
            )
        points.extend(recs)


def _bisect_round(
    ctx: _Ctx,
    plans: list[Any],
    pending: list[tuple[int, list[int]]],
    des_rate: dict[tuple[str, tuple[int, int]], tuple[float, Decision | None, dict[float, Decision]]],
) -> None:
    pb = ctx.problem
    tasks: list[tuple[Any, ...]] = []
    owners: list[tuple[str, list[tuple[int, int]]]] = []
    n_chunks = max(1, ctx.runner.workers * 2)
    total = sum(len(ix) for _k, ix in pending)
    for k, idx in pending:
        space, design, splits, _rates = plans[k]
        share = max(1, round(n_chunks * len(idx) / max(total, 1)))
        for block in chunks(idx, share):
            sp = [splits[i] for i in block]
            # every engine gallops from the same anchor (the target rate): DES feasibility is not
            # perfectly monotone in the rate, and a common start makes hybrid and exhaustive agree
            guesses = [1.0 for _i in block]
            tasks.append((bisect_many, ctx.cached(space.name), design, sp, guesses, pb.rate_tol))
            owners.append((space.name, sp))
    outs = ctx.map(_call, tasks, lambda res: res[1])
    for (name, sp), (per_split, _fresh) in zip(owners, outs, strict=True):
        for s, (f, d, probes) in zip(sp, per_split, strict=True):
            des_rate[(name, s)] = (f, d, probes)
