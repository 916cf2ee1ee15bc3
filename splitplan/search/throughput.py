"""Layer 5: the throughput objective — the highest request rate meeting all nine SLOs per split.

Rates are factors of the scenario's rate (arrival times ÷ factor). Candidate splits under a budget
are the maximal affordable ones (throughput cannot fall when a machine is added). The analytic
screen brackets each split's rate (vectorized bisection over all splits at once); the DES then
bisects from that bracket to a relative tolerance. The hybrid DES-bisects splits in decreasing
analytic rate until no remaining split's analytic rate is within (1 + band) of the best DES rate.
The rate primitives live in search.rates (the Optuna strategy uses them too); this module is the
strategy over a 1–2 dimensional count grid.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from splitplan.design import Design
from splitplan.search.context import SearchContext, call
from splitplan.search.evaluate import Decision
from splitplan.search.objective import Engine
from splitplan.search.parallel import chunks
from splitplan.search.problem import DesignSpace
from splitplan.search.rates import analytic_rates, bisect_many, maximal_splits
from splitplan.search.result import (
    DecidedBy,
    DesignResult,
    PointRecord,
    des_record,
    empty_result,
    point_record,
    result_from_record,
)

# ---------------------------------------------------------------- the strategy over a count grid

RateVerdicts = dict[tuple[str, tuple[int, int]], tuple[float, Decision | None, dict[float, Decision]]]


def solve_throughput_grid(
    ctx: SearchContext, spaces: list[DesignSpace]
) -> list[tuple[DesignResult, list[PointRecord]]]:
    """Per space (in order): the split with the highest rate meeting every SLO under the budget."""
    pb = ctx.problem
    plans = []
    for space in spaces:
        sg = ctx.space_grid(space)
        splits = maximal_splits(sg.grid.p_values, sg.grid.t_values, sg.within_budget.reshape(sg.grid.shape))
        if pb.engine is Engine.DES:
            rates = np.ones(len(splits))
        else:
            rates = analytic_rates(ctx.evaluator, sg.design, splits, pb.rate_tol)
        plans.append((space, sg.design, splits, rates))

    des_rate: RateVerdicts = {}
    if pb.engine is not Engine.ANALYTIC:
        # round 1: the analytically best split of every design (every split for the exhaustive engine)
        pending: list[tuple[int, list[int]]] = []
        for k, (_space, _design, splits, rates) in enumerate(plans):
            if not splits:
                continue
            if pb.engine is Engine.DES:
                pending.append((k, list(range(len(splits)))))
            else:
                order = np.argsort(-rates, kind="stable")
                pending.append((k, [int(order[0])]))
        while pending:
            _bisect_round(ctx, plans, pending, des_rate)
            pending = []
            if pb.engine is Engine.HYBRID:
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
    return [_finish(ctx, plan, des_rate) for plan in plans]


Plan = tuple[DesignSpace, Design, list[tuple[int, int]], np.ndarray]


def _finish(ctx: SearchContext, plan: Plan, des_rate: RateVerdicts) -> tuple[DesignResult, list[PointRecord]]:
    pb = ctx.problem
    space, design, splits, rates = plan
    recs: list[PointRecord] = []
    best_i: int | None = None
    best_key: tuple[float, ...] | None = None

    def consider(i: int, rate_factor: float) -> None:
        nonlocal best_i, best_key
        key = recs[i].rank_key(pb.objective, rate=rate_factor)
        if best_key is None or key < best_key:
            best_i, best_key = i, key

    for i, s in enumerate(splits):
        if (space.name, s) in des_rate:
            f, _d, probes = des_rate[(space.name, s)]
            for fp, dp in sorted(probes.items()):
                recs.append(des_record(space.name, design, s[0], s[1], fp * pb.rate_rps, dp))
                if f > 0 and fp == f:
                    consider(len(recs) - 1, f)
        else:
            f = float(rates[i])
            recs.append(
                point_record(
                    space=space.name,
                    design=design,
                    prompt=s[0],
                    token=s[1],
                    rate_rps=f * pb.rate_rps,
                    within_budget=True,
                    meets=f > 0,
                    decided_by=DecidedBy.ANALYTIC,
                )
            )
            if pb.engine is Engine.ANALYTIC and f > 0:
                consider(len(recs) - 1, f)
    n_des = sum(len(v[2]) for (name, _s), v in des_rate.items() if name == space.name)
    if best_i is None:
        return empty_result(space.name, design, des_evaluations=n_des, method="grid"), recs
    best = result_from_record(recs[best_i], baseline=space.baseline, des_evaluations=n_des, method="grid")
    return best, recs


def _bisect_round(
    ctx: SearchContext, plans: list[Any], pending: list[tuple[int, list[int]]], des_rate: RateVerdicts
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
    outs = ctx.map(call, tasks, lambda res: res[1])
    for (name, sp), (per_split, _fresh) in zip(owners, outs, strict=True):
        for s, (f, d, probes) in zip(sp, per_split, strict=True):
            des_rate[(name, s)] = (f, d, probes)
