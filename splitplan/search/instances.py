"""Layer 5: pools whose instance — tensor parallelism, weight and KV precision — is searched.

A small space (all combinations × their count grids within `GRID_POINT_LIMIT` points, fixed power
caps) is solved exactly: one fixed-instance grid per combination of prompt and token instance,
all run together by the grid driver, and merged back into one row per design with the cheapest
(instance, count) of each pool. Larger spaces go to Optuna, where TP and precision are categorical
dimensions like the GPU type.

Count ranges of such a space are in instances of its smallest TP; the grid of a combination keeps
the same node budget (a TP-8 pool of a range up to 39 spans up to 39 nodes, a TP-2 pool up to 156
instances on the same 39 nodes).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

from splitplan.catalog import get_machine_type
from splitplan.search.objective import Method
from splitplan.search.problem import DesignSpace, PoolSpace, SearchProblem
from splitplan.search.result import DesignResult, PointRecord, empty_result

GRID_POINT_LIMIT = 4 * 39 * 39  # DES-decidable grid points up to which combinations are exhaustive
_SEP = "#"  # parent design name # combination index: the name of one combination's grid


def _smallest_tp(pool: PoolSpace) -> int:
    return min(tp or get_machine_type(g).gpus for g in pool.gpus for tp in pool.tps)


def _pool_of(pool: PoolSpace, choice: tuple[str, int | None, str, str | None]) -> PoolSpace:
    gpu, tp, precision, kv = choice
    return PoolSpace(
        gpus=(gpu,), power_cap=pool.power_cap, tps=(tp,), precisions=(precision,), kv_precisions=(kv,)
    )


def _scaled(rng: tuple[int, int], smallest_tp: int, tp: int) -> tuple[int, int]:
    """The count range of a TP-`tp` pool on the node budget of `rng` instances of `smallest_tp`."""
    lo, hi = rng
    return lo, max(lo, hi * smallest_tp // tp)


def combinations(space: DesignSpace) -> list[DesignSpace]:
    """One fixed-instance space per combination of the pools' choices, in option order."""
    pools = [space.prompt] if space.baseline else [space.prompt, space.token]
    choices = [p.instance_choices() for p in pools]
    out = []
    for i, combo in enumerate(itertools.product(*choices)):
        pc = combo[0]
        tc = combo[0] if space.baseline else combo[1]
        tp_p = pc[1] or get_machine_type(pc[0]).gpus
        tp_t = tc[1] or get_machine_type(tc[0]).gpus
        out.append(
            DesignSpace(
                name=f"{space.name}{_SEP}{i}",
                baseline=space.baseline,
                prompt=_pool_of(space.prompt, pc),
                token=_pool_of(space.token, tc),
                prompt_range=_scaled(space.prompt_range, _smallest_tp(space.prompt), tp_p),
                token_range=space.token_range
                if space.baseline
                else _scaled(space.token_range, _smallest_tp(space.token), tp_t),
            )
        )
    return out


def _grid_points(space: DesignSpace) -> int:
    n = space.prompt_range[1] - space.prompt_range[0] + 1
    if not space.baseline:
        n *= space.token_range[1] - space.token_range[0] + 1
    return n


def expands(problem: SearchProblem, space: DesignSpace) -> bool:
    """Solve this space as exhaustive per-combination grids (else the usual method applies)."""
    pools = [space.prompt] if space.baseline else [space.prompt, space.token]
    if not any(p.has_instance_choices for p in pools) or problem.method is Method.OPTUNA:
        return False
    if any(p.power_cap[0] < p.power_cap[1] for p in pools):
        return False  # a continuous cap is Optuna's
    if problem.method is Method.GRID:
        return True
    return sum(_grid_points(s) for s in combinations(space)) <= GRID_POINT_LIMIT


def merge(
    problem: SearchProblem,
    space: DesignSpace,
    subs: list[DesignSpace],
    results: dict[str, DesignResult],
    points: list[PointRecord],
) -> DesignResult:
    """The design's row: the best combination (search.objective's tie-break, then option order);
    its points are relabelled with the design's name (their TP and precision columns tell them
    apart)."""
    names = {s.name for s in subs}
    for i, rec in enumerate(points):
        if rec.design in names:
            points[i] = replace(rec, design=space.name)
    rows = [results.pop(s.name) for s in subs]
    n_des = sum(r.des_evaluations for r in rows)
    ok = [r for r in rows if r.meets_slo]
    if not ok:  # the combination that came closest tells why, and what to change (search.ranges)
        near = max(rows, key=_closeness)
        if near.closest is None:
            return empty_result(space.name, space.design(), des_evaluations=n_des, method="grid")
        return replace(near, design=space.name, des_evaluations=n_des, method="grid")
    best = min(ok, key=lambda r: r.rank_key(problem.objective))  # the one tie-break; stable: option order
    return replace(best, design=space.name, des_evaluations=n_des, method="grid")


def _closeness(r: DesignResult) -> float:
    """How near an infeasible combination came: its closest configuration's margin (−inf when it
    had none, or was unstable)."""
    margin = (r.shortfall or {}).get("margin")
    return float(margin) if isinstance(margin, int | float) else -math.inf
