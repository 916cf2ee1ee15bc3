"""Layer 5: the cost / power strategy over the (prompt, token) count grid of 1–2 dimensional spaces.

Stages run across all designs at once so parallel workers stay busy: (1) analytic screens in this
process, (2) one task per design column block (hybrid walks) or per chunk of points (exhaustive
DES), (3) the hybrid's verification pass, (4) the per-design optimum by the one tie-break rule
(search.objective). The exactness argument is in search.grid.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from splitplan.search.context import SearchContext, SpaceGrid, call
from splitplan.search.evaluate import Decision, Screen
from splitplan.search.grid import (
    baseline_guess,
    classify,
    decide_points,
    guesses_for,
    near_miss_only,
    verify_candidates,
    walk_columns,
    walk_line,
)
from splitplan.search.objective import Engine
from splitplan.search.parallel import chunks
from splitplan.search.problem import DesignSpace
from splitplan.search.result import (
    DecidedBy,
    DesignResult,
    PointRecord,
    empty_result,
    point_record,
    result_from_record,
)

BASELINE_SCREEN_WAYS = 32  # counts a baseline's screen search screens per round (search.frontier)
WALK_BLOCKS = 2  # column blocks per Splitwise design in the hybrid walk (parallel tasks)
VERIFY_ROUNDS = 3
MAX_WIDENINGS = 8  # automatic ranges double at most this many times (search.ranges)
WHOLE_GRID_MAX_POINTS = 1_000_000  # an exhaustive sweep's automatic range stops growing here
# what decided a point, by classify's `how` (0–2) and 3 for the analytic engine
DECIDED_BY = (DecidedBy.DES, DecidedBy.DOMINANCE, DecidedBy.UNDECIDED, DecidedBy.ANALYTIC)


@dataclass(slots=True)
class _GridState:
    sg: SpaceGrid
    screen: Screen | None
    decided: dict[tuple[int, int], Decision] = field(default_factory=dict)

    @property
    def space(self) -> DesignSpace:
        return self.sg.space

    @property
    def design(self) -> Any:
        return self.sg.design


def solve_cost_grid(
    ctx: SearchContext, spaces: list[DesignSpace]
) -> list[tuple[DesignResult, list[PointRecord]]]:
    """Per space (in order): its best configuration and the record of every point evaluated.

    Automatic ranges (`DesignSpace.auto_range`) are first sized from a capacity estimate at the
    target rate and widened while the optimum sits on their edge (search.ranges).
    """
    from splitplan.search.ranges import derive_range, explain_limits, latency_bound, widened

    pb = ctx.problem
    current = [derive_range(ctx, s) if s.auto_range else s for s in spaces]
    out = _solve_once(ctx, current)
    memory_bound: set[int] = set()
    for _ in range(MAX_WIDENINGS):
        again = []
        for i, s in enumerate(current):
            nxt = None if i in memory_bound else widened(ctx, s, out[i][0])
            if nxt is None:
                continue
            if pb.engine is Engine.DES and _points(nxt) > WHOLE_GRID_MAX_POINTS:
                memory_bound.add(i)  # an exhaustive sweep holds every point: memory stops it
                continue
            current[i] = nxt
            again.append(i)
        if not again:
            break
        for i, solved in zip(again, _solve_once(ctx, [current[i] for i in again]), strict=True):
            out[i] = solved
    results = []
    for i, (s, (best, recs)) in enumerate(zip(current, out, strict=True)):
        explained = explain_limits(pb, s, best, recs)
        if i in memory_bound and explained.limited_by == "range":
            explained = replace(explained, limited_by="memory")
        elif not explained.meets_slo and explained.limited_by == "range" and latency_bound(ctx, s):
            explained = replace(explained, limited_by="latency")
        results.append((explained, recs))
    return results


def _points(space: DesignSpace) -> int:
    n_p = space.prompt_range[1] - space.prompt_range[0] + 1
    return n_p if space.baseline else n_p * (space.token_range[1] - space.token_range[0] + 1)


def _solve_once(
    ctx: SearchContext, spaces: list[DesignSpace]
) -> list[tuple[DesignResult, list[PointRecord]]]:
    """One pass over fixed ranges: large grids along their frontier, the rest over the whole grid."""
    from splitplan.search.frontier import use_frontier

    pb = ctx.problem
    along = [pb.engine is not Engine.DES and use_frontier(pb, s) for s in spaces]
    whole = _solve_whole(ctx, [s for s, f in zip(spaces, along, strict=True) if not f])
    front = _solve_frontier(ctx, [s for s, f in zip(spaces, along, strict=True) if f])
    return [front.pop(0) if f else whole.pop(0) for f in along]


def _solve_whole(
    ctx: SearchContext, spaces: list[DesignSpace]
) -> list[tuple[DesignResult, list[PointRecord]]]:
    """The whole-grid strategy: screen every point, walk every column (search.grid)."""
    pb = ctx.problem
    states = []
    for space in spaces:
        sg = ctx.space_grid(space)
        screen = None if pb.engine is Engine.DES else ctx.grid_screen(sg)
        states.append(_GridState(sg=sg, screen=screen))

    if pb.engine is not Engine.ANALYTIC:
        tasks: list[tuple[Any, ...]] = []
        owners: list[_GridState] = []
        if pb.engine is Engine.HYBRID:
            _add_walk_tasks(ctx, states, tasks, owners)
        else:
            every = {id(s): list(zip(s.sg.p.tolist(), s.sg.t.tolist(), strict=True)) for s in states}
            _add_point_tasks(ctx, states, every, tasks, owners)
        _decide(ctx, tasks, owners)
        if pb.engine is Engine.HYBRID:
            _verify(ctx, states)
    return [_finish(ctx, st) for st in states]


def _add_walk_tasks(
    ctx: SearchContext, states: list[_GridState], tasks: list[tuple[Any, ...]], owners: list[_GridState]
) -> None:
    for st in states:
        sp, g = st.space, st.sg.grid
        if sp.baseline:
            guess = baseline_guess(g, st.screen)
            tasks.append((walk_line, ctx.cached(sp.name), st.sg.design, sp.prompt_range, guess, 1.0))
            owners.append(st)
            continue
        guesses = guesses_for(g, st.screen)
        ps = [int(v) for v in g.p_values]
        # a fixed number of column blocks (not tied to the worker count) keeps the evaluated
        # points, and so the output, identical whatever the number of workers
        for block in chunks(list(zip(ps, guesses, strict=True)), WALK_BLOCKS):
            cols, col_guesses = [b[0] for b in block], [b[1] for b in block]
            tasks.append(
                (walk_columns, ctx.cached(sp.name), st.sg.design, cols, sp.token_range, col_guesses, 1.0)
            )
            owners.append(st)


def _verify(ctx: SearchContext, states: list[_GridState]) -> None:
    """The hybrid's guard, for every design in one parallel batch per round: DES-check undecided
    points and dominance-infeasible points no dearer than the optimum within the analytic band or
    dominated only by near misses."""
    pb = ctx.problem
    for _ in range(VERIFY_ROUNDS):
        todo: dict[int, list[tuple[int, int]]] = {}
        for st in states:
            sg = st.sg
            obj = sg.score(pb.objective)
            meets2, how2 = classify(sg.grid, st.decided)
            meets, how = meets2.ravel(), how2.ravel()
            bi = sg.best(pb.objective, meets & (how != 2))
            best_obj = obj[bi] if bi is not None else math.inf
            margin = st.screen.margin if st.screen is not None else np.full(len(sg.p), math.inf)
            idx = verify_candidates(
                how,
                meets,
                sg.within_budget,
                obj,
                np.nan_to_num(margin, nan=math.inf),
                best_obj,
                pb.band,
                near_miss_only(sg.grid, st.decided),
            )
            if len(idx):
                todo[id(st)] = [(int(sg.p[i]), int(sg.t[i])) for i in idx]
        if not todo:
            return
        tasks: list[tuple[Any, ...]] = []
        owners: list[_GridState] = []
        _add_point_tasks(ctx, states, todo, tasks, owners)
        _decide(ctx, tasks, owners)


def _add_point_tasks(
    ctx: SearchContext,
    states: list[Any],
    todo: dict[int, list[tuple[int, int]]],
    tasks: list[tuple[Any, ...]],
    owners: list[Any],
    stop_below_headroom: float | None = None,
) -> None:
    """Chunks of points per design (a grid or a frontier state): a few per worker, so progress
    moves and loads balance; their runs stop below `stop_below_headroom` (None: to the end)."""
    total = sum(len(v) for v in todo.values())
    if not total:
        return
    per_chunk = max(8, math.ceil(total / (4 * ctx.runner.workers)))
    for st in states:
        pts = todo.get(id(st), [])
        for block in chunks(pts, max(1, math.ceil(len(pts) / per_chunk))):
            evaluator = ctx.cached(st.space.name, stop_below_headroom)
            tasks.append((decide_points, evaluator, st.design, block, 1.0))
            owners.append(st)


def _decide(ctx: SearchContext, tasks: list[tuple[Any, ...]], owners: list[Any]) -> None:
    """Run `decide_points` tasks (in parallel) and give each its owner's verdicts."""
    for st, (seen, _fresh) in zip(owners, ctx.map(call, tasks, lambda res: res[1]), strict=True):
        st.decided.update(seen)


def _finish(ctx: SearchContext, st: _GridState) -> tuple[DesignResult, list[PointRecord]]:
    pb = ctx.problem
    sg = st.sg
    n = len(sg.p)
    margin = st.screen.margin if st.screen is not None else np.full(n, np.nan)
    if pb.engine is Engine.ANALYTIC:
        meets = margin >= 0
        how = np.full(n, 3)
    else:
        # a DES-decided point keeps its own verdict even where dominance would disagree
        meets2, how2 = classify(sg.grid, st.decided)
        meets, how = meets2.ravel(), how2.ravel()
    records = []
    for i in range(n):
        d = st.decided.get((int(sg.p[i]), int(sg.t[i])))
        by = DECIDED_BY[int(how[i])]
        if d is not None:
            sd: dict[str, float] | None = d.slowdown
            lat: dict[str, float] | None = d.latency_s
        elif st.screen is not None:
            sd = {k: float(v[i]) for k, v in st.screen.slowdown.items()}
            lat = {k: float(v[i]) for k, v in st.screen.latency_s.items()}
        else:
            sd = lat = None
        records.append(
            point_record(
                space=st.space.name,
                design=sg.design,
                prompt=int(sg.p[i]),
                token=int(sg.t[i]),
                rate_rps=pb.rate_rps,
                within_budget=bool(sg.within_budget[i]),
                analytic_margin=float(margin[i]),
                des_margin=d.measured_margin if d is not None else math.nan,
                meets=bool(meets[i]),
                decided_by=by,
                binding=_binding_of(d, st.screen, i, by),
                slowdown=sd,
                latency_s=lat,
                cost_usd_per_h=float(sg.cost[i]),
                power_kw=float(sg.power[i]),
            )
        )
    n_des = len(st.decided)
    bi = sg.best(pb.objective, meets & (how != 2))
    if bi is None:
        return empty_result(st.space.name, sg.design, des_evaluations=n_des, method="grid"), records
    return (
        result_from_record(records[bi], baseline=st.space.baseline, des_evaluations=n_des, method="grid"),
        records,
    )


def _binding_of(d: Decision | None, screen: Screen | None, i: int, decided_by: DecidedBy) -> str:
    """The binding limit of the verdict a point's record reports (none for dominance verdicts)."""
    if d is not None:
        return d.binding
    if decided_by is DecidedBy.ANALYTIC and screen is not None and screen.binding is not None:
        return str(screen.binding[i])
    return ""


# ---------------------------------------------------------------- along the frontier (large grids)


def _solve_frontier(
    ctx: SearchContext, spaces: list[DesignSpace]
) -> list[tuple[DesignResult, list[PointRecord]]]:
    """The frontier strategy (search.frontier) for every space at once, round by round."""
    from splitplan.search.frontier import (
        STOP_BELOW_HEADROOM,
        FrontierState,
        KeyOf,
        screen_first_passing,
        walk_column,
    )

    if not spaces:
        return []
    pb = ctx.problem
    states = []
    for space in spaces:
        design = space.design()
        if space.baseline:
            lo, hi = space.prompt_range
            guess = screen_first_passing(
                ctx.evaluator,
                design,
                np.zeros(1, dtype=np.int64),
                lo,
                hi,
                baseline=True,
                ways=BASELINE_SCREEN_WAYS,
            )
        else:
            ps = np.arange(space.prompt_range[0], space.prompt_range[1] + 1, dtype=np.int64)
            t_lo, t_hi = space.token_range
            guess = screen_first_passing(ctx.evaluator, design, ps, t_lo, t_hi, baseline=False)
        states.append(FrontierState(space=space, design=design, keys=KeyOf(pb, design), guess=guess))
    if pb.engine is Engine.ANALYTIC:
        return [_finish_frontier_analytic(ctx, st) for st in states]

    work = [(st, col) for st in states for col in st.seeds()]
    while work:
        tasks: list[tuple[Any, ...]] = [
            (walk_column, ctx.cached(st.space.name, STOP_BELOW_HEADROOM), st.design, c, 1.0, st.baseline)
            for st, c in work
        ]
        for (st, c), (low, up, seen, _fresh) in zip(
            work, ctx.map(call, tasks, lambda res: res[3]), strict=True
        ):
            st.record(c.p, low, up)
            st.decided.update(seen)
        work = [(st, col) for st in states for col in st.next_columns()]

    def margin_of(st: FrontierState) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
        return lambda p, t: ctx.evaluator.screen(st.design, p, t, 1.0).margin

    for _ in range(VERIFY_ROUNDS):
        _settle_cliffs(ctx, states, {id(st): margin_of(st) for st in states})
        todo: dict[int, list[tuple[int, int]]] = {}
        for st in states:
            cands = st.guard_candidates(margin_of(st), pb.band)
            if cands:
                todo[id(st)] = cands
        if not todo:
            break
        g_tasks: list[tuple[Any, ...]] = []
        owners: list[FrontierState] = []
        _add_point_tasks(ctx, states, todo, g_tasks, owners, STOP_BELOW_HEADROOM)
        _decide(ctx, g_tasks, owners)
    _settle_closest_miss(ctx, states, STOP_BELOW_HEADROOM)
    return [_finish_frontier(ctx, st) for st in states]


def _settle_cliffs(
    ctx: SearchContext, states: list[Any], screens: dict[int, Callable[[np.ndarray, np.ndarray], np.ndarray]]
) -> None:
    """Stopped failures whose cliff the guard's candidates depend on are simulated again to the
    bound that tells it (search.frontier.FrontierState.unsettled_cliffs), all designs' at once; a
    re-run settles its point (each is simulated again once), so this ends once none is left."""
    done: set[tuple[int, int, int]] = set()
    while True:
        tasks: list[tuple[Any, ...]] = []
        owners: list[Any] = []
        for st in states:
            for pt, bound in sorted(st.unsettled_cliffs(screens[id(st)], ctx.problem.band).items()):
                if (id(st), *pt) in done:
                    continue
                done.add((id(st), *pt))
                tasks.append((decide_points, ctx.cached(st.space.name, bound), st.design, [pt], 1.0))
                owners.append(st)
        if not tasks:
            return
        _decide(ctx, tasks, owners)


def _settle_closest_miss(ctx: SearchContext, states: list[Any], bound: float) -> None:
    """A design with no passing point is explained by its closest miss (search.ranges), read from
    the DES margins; runs stopped early have none. Unless a run to the end failed by less than the
    stop's bound (closer than any stopped run), the stopped run with the most machines — the
    closest under monotonicity — is simulated again to the end."""
    tasks: list[tuple[Any, ...]] = []
    owners: list[Any] = []
    for st in states:
        if st.best()[0] is not None:
            continue
        cut = [pt for pt, d in st.decided.items() if not d.complete]
        whole = [d.margin for d in st.decided.values() if d.complete]
        if not cut or (whole and max(whole) >= bound):
            continue
        pt = max(cut, key=lambda q: (q[0] + q[1], q[0]))
        tasks.append((decide_points, ctx.cached(st.space.name), st.design, [pt], 1.0))
        owners.append(st)
    if tasks:
        _decide(ctx, tasks, owners)


def _finish_frontier(ctx: SearchContext, st: Any) -> tuple[DesignResult, list[PointRecord]]:
    """The optimum of a frontier search and the record of every DES-decided point."""
    pb = ctx.problem
    pts = sorted(st.decided)
    records = []
    for p, t in pts:
        d = st.decided[(p, t)]
        records.append(
            point_record(
                space=st.space.name,
                design=st.design,
                prompt=p,
                token=t,
                rate_rps=pb.rate_rps,
                within_budget=st.keys.key(p, t) is not None,
                des_margin=d.measured_margin,
                meets=d.meets,
                decided_by=DecidedBy.DES,
                binding=d.binding,
                slowdown=d.slowdown,
                latency_s=d.latency_s,
                des_stopped=not d.complete,
            )
        )
    best, _key = st.best()
    n_des = len(st.decided)
    if best is None:
        return empty_result(st.space.name, st.design, des_evaluations=n_des, method="grid"), records
    rec = records[pts.index(best)]
    return result_from_record(rec, baseline=st.space.baseline, des_evaluations=n_des, method="grid"), records


def _finish_frontier_analytic(ctx: SearchContext, st: Any) -> tuple[DesignResult, list[PointRecord]]:
    """The analytic engine on a large grid: the screen's frontier points and their optimum."""
    pb = ctx.problem
    if st.baseline:
        n = int(st.guess[0])
        hi = st.space.prompt_range[1]
        ps = np.array([n] if n <= hi else [hi], dtype=np.int64)
        ts = np.zeros(1, dtype=np.int64)
    else:
        cols = np.arange(st.space.prompt_range[0], st.space.prompt_range[1] + 1, dtype=np.int64)
        ts = np.minimum(st.guess, st.space.token_range[1]).astype(np.int64)
        ps = cols
    scr = ctx.evaluator.screen(st.design, ps, ts, 1.0)
    meets = scr.margin >= 0
    records = [
        point_record(
            space=st.space.name,
            design=st.design,
            prompt=int(ps[i]),
            token=int(ts[i]),
            rate_rps=pb.rate_rps,
            within_budget=st.keys.key(int(ps[i]), int(ts[i])) is not None,
            analytic_margin=float(scr.margin[i]),
            meets=bool(meets[i]),
            decided_by=DecidedBy.ANALYTIC,
            binding="" if scr.binding is None else str(scr.binding[i]),
            slowdown={k: float(v[i]) for k, v in scr.slowdown.items()},
            latency_s={k: float(v[i]) for k, v in scr.latency_s.items()},
        )
        for i in range(len(ps))
    ]
    ok = meets & st.keys.beats(ps, ts, None)
    if not ok.any():
        return empty_result(st.space.name, st.design, des_evaluations=0, method="grid"), records
    keys, _ok = st.keys.arrays(ps, ts)
    idx = np.nonzero(ok)[0]
    bi = int(idx[np.lexsort(tuple(k[idx] for k in reversed(keys)))[0]])
    return result_from_record(
        records[bi], baseline=st.space.baseline, des_evaluations=0, method="grid"
    ), records


__all__ = ["solve_cost_grid"]
