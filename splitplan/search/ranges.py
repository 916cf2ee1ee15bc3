"""Layer 5: count ranges that follow the load, and what limited a search.

The paper's default ranges (1–39 machines per Splitwise pool, 1–80 for a baseline) are sized for
~70 req/s. A range nobody gave (`DesignSpace.auto_range`: no explicit range, no `max_machines`)
is sized from a capacity estimate at the target rate instead:

- the estimate is the analytic screen's smallest passing size on the diagonal (p = t machines;
  a baseline's N), found by bisection — a handful of screened points, whatever the rate;
- each pool's range is then 1 .. max(default, ⌈headroom × estimate⌉): a Splitwise pool gets
  SPLIT_HEADROOM (the optimum trades machines between the pools, so one of them may need well
  over the balanced size), a baseline BASELINE_HEADROOM;
- after the search, an optimum on the top edge of an automatic range doubles that range and the
  search runs again (its DES verdicts are kept, so only new points cost), up to AUTO_MAX_MACHINES
  per pool; a design with no passing point doubles both pools while the screen's margin still
  grows with the machines added. A given range or `max_machines` is honoured exactly, and an
  optimum on its edge is reported as limited by the range.

`explain_limits` turns a result into its explanation: the closest configuration tried (highest
DES margin, else analytic), the binding SLO and its shortfall there, and what limited the search
(`range`, `budget` or `memory`). `latency_bound` tells one more limit apart from the range: the
machines' own latency, which no count of them lowers (`latency`).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from splitplan.search.context import SearchContext
from splitplan.search.problem import DEFAULT_BASELINE_MAX, DEFAULT_SPLIT_RANGE, DesignSpace, SearchProblem
from splitplan.search.result import INSTANCE_KEYS, DecidedBy, DesignResult, PointRecord

SPLIT_HEADROOM = 2.0
BASELINE_HEADROOM = 1.25
AUTO_MAX_MACHINES = 1 << 16  # per pool: far beyond any fleet; bounds the doubling
MARGIN_GAIN = 1e-3  # a doubling of a design with no passing point must raise the screen's margin this much


def _margin(ctx: SearchContext, space: DesignSpace, p: int, t: int) -> float:
    design = space.design()
    m = ctx.evaluator.screen(design, np.array([p], dtype=np.int64), np.array([t], dtype=np.int64), 1.0).margin
    v = float(np.asarray(m, dtype=np.float64)[0])
    return -math.inf if math.isnan(v) else v


def _margins(ctx: SearchContext, space: DesignSpace, n: np.ndarray) -> np.ndarray:
    """The screen's margins on the diagonal p = t = n (a baseline: N = n), NaN read as failing."""
    t = np.zeros_like(n) if space.baseline else n
    m = np.asarray(ctx.evaluator.screen(space.design(), n, t, 1.0).margin, dtype=np.float64)
    return np.nan_to_num(m, nan=-np.inf)


def capacity_estimate(ctx: SearchContext, space: DesignSpace) -> int | None:
    """The screen's smallest passing size on the diagonal (a baseline: N), None when none passes up
    to AUTO_MAX_MACHINES. One screen call over every size of the default range; beyond it a
    doubling ladder screened rung by rung up to the first that passes, then a bisection of the
    bracket that rung closes."""
    default_hi = DEFAULT_BASELINE_MAX if space.baseline else DEFAULT_SPLIT_RANGE[1]
    sizes = np.arange(1, default_hi + 1, dtype=np.int64)
    ok = _margins(ctx, space, sizes) >= 0.0
    if ok.any():
        return int(sizes[int(np.argmax(ok))])

    # the doubling ladder, one rung at a time up to the first that passes: a rung costs the screen
    # in proportion to its size (the admission chain's tables), so rungs far beyond the load are
    # not screened (at 70 req/s they were most of the estimate's time)
    def passes(n: int) -> bool:
        return _margin(ctx, space, n, 0 if space.baseline else n) >= 0.0

    ladder = [default_hi * 2**k for k in range(1, 32) if default_hi * 2**k < AUTO_MAX_MACHINES]
    lo = default_hi
    for hi in [*ladder, AUTO_MAX_MACHINES]:
        if passes(hi):
            break
        lo = hi
    else:
        return None
    # bisection between lo (fails) and hi (passes): the screen's margin grows along the diagonal
    # (more machines of both pools), so this is the bracket's first passing size, found in
    # log2(bracket) single-point screens where screening every size cost seconds at 10,000 req/s
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if passes(mid):
            hi = mid
        else:
            lo = mid
    return hi


def derive_range(ctx: SearchContext, space: DesignSpace) -> DesignSpace:
    """An automatic range sized for the target rate (never below the paper's default)."""
    est = capacity_estimate(ctx, space)
    if est is None:
        return space
    if space.baseline:
        hi = max(space.prompt_range[1], DEFAULT_BASELINE_MAX, math.ceil(BASELINE_HEADROOM * est))
        return replace(space, prompt_range=(space.prompt_range[0], min(hi, AUTO_MAX_MACHINES)))
    hi = min(max(DEFAULT_SPLIT_RANGE[1], math.ceil(SPLIT_HEADROOM * est)), AUTO_MAX_MACHINES)
    return replace(
        space,
        prompt_range=(space.prompt_range[0], max(space.prompt_range[1], hi)),
        token_range=(space.token_range[0], max(space.token_range[1], hi)),
    )


def on_edge(space: DesignSpace, res: DesignResult) -> tuple[bool, bool]:
    """(prompt, token): whether the optimum sits on the top of that pool's range."""
    if not res.meets_slo:
        return False, False
    if space.baseline:
        return res.machines == space.prompt_range[1], False
    p, t = res.instance_counts
    return p == space.prompt_range[1], t == space.token_range[1]


def widened(ctx: SearchContext, space: DesignSpace, res: DesignResult) -> DesignSpace | None:
    """The next automatic range when the optimum is on its edge (or none passes and more machines
    still help the screen); None when the range stays."""
    if not space.auto_range:
        return None
    p_hi, t_hi = space.prompt_range[1], space.token_range[1]
    if res.meets_slo:
        edge_p, edge_t = on_edge(space, res)
    else:
        grow_p = min(2 * p_hi, AUTO_MAX_MACHINES)
        grow_t = t_hi if space.baseline else min(2 * t_hi, AUTO_MAX_MACHINES)
        before = _margin(ctx, space, p_hi, t_hi)
        after = _margin(ctx, space, grow_p, grow_t)
        edge_p = edge_t = after > before + MARGIN_GAIN
        edge_t = edge_t and not space.baseline
    new_p = min(2 * p_hi, AUTO_MAX_MACHINES) if edge_p else p_hi
    new_t = min(2 * t_hi, AUTO_MAX_MACHINES) if edge_t else t_hi
    if (new_p, new_t) == (p_hi, t_hi):
        return None
    if space.baseline:
        return replace(space, prompt_range=(space.prompt_range[0], new_p))
    return replace(
        space, prompt_range=(space.prompt_range[0], new_p), token_range=(space.token_range[0], new_t)
    )


def _margin_of(rec: PointRecord) -> float:
    v = float(rec.margin)
    return -math.inf if math.isnan(v) else v


def closest_record(records: list[PointRecord]) -> PointRecord | None:
    """The configuration tried that came closest to meeting every SLO: the highest DES margin
    (else the highest analytic margin), preferring points within the budget; ties → fewer machines."""
    if not records:
        return None
    pool = [r for r in records if r.within_budget] or records
    des = [r for r in pool if r.decided_by is DecidedBy.DES]
    pool = des or pool
    return max(pool, key=lambda r: (_margin_of(r), -int(r.machines or 0)))


# the whole cluster's request rate at which the latency check screens its largest configuration:
# one request every ten seconds, whatever the target, so that requests meet no queue and what is
# left is the machines' own latency (a fraction of the target would still queue on a small range)
LATENCY_CHECK_RPS = 0.1


def latency_bound(ctx: SearchContext, space: DesignSpace) -> bool:
    """Whether even the largest configuration of a fixed design misses the SLOs with requests
    arriving alone: then a request alone is too slow there (a TTFT slowdown over its limit on a
    slow link, say), and a wider count range, which the range limit would advise, cannot help."""
    if not space.is_fixed_pools:
        return False  # several machine types or instances: no one design to check
    scale = min(1.0, LATENCY_CHECK_RPS / ctx.problem.rate_rps)
    p = np.array([space.prompt_range[1]], dtype=np.int64)
    t = np.array([0 if space.baseline else space.token_range[1]], dtype=np.int64)
    margin = float(np.asarray(ctx.evaluator.screen(space.design(), p, t, scale).margin)[0])
    return margin < 0


def explain_limits(
    problem: SearchProblem, space: DesignSpace, res: DesignResult, records: list[PointRecord]
) -> DesignResult:
    """`res` with `closest`, `shortfall` and `limited_by` (see the module doc)."""
    edge_p, edge_t = on_edge(space, res)
    if res.meets_slo:
        if (edge_p or edge_t) and not space.auto_range:
            return replace(res, limited_by="range")
        return res
    limited = "range"
    if any(r.meets_slo and not r.within_budget for r in records) or (
        (problem.power_budget_kw is not None or problem.cost_budget_usd_per_h is not None)
        and records
        and not any(r.within_budget for r in records if r.decided_by is DecidedBy.DES)
    ):
        limited = "budget"
    rec = closest_record(records)
    if rec is None:
        return replace(res, limited_by=limited)
    margin = _margin_of(rec)
    closest: dict[str, object] = {
        "prompt_machines": rec.prompt_machines,
        "token_machines": rec.token_machines,
        "machines": rec.machines,
        "cost_usd_per_h": rec.cost_usd_per_h,
        "power_kw": rec.power_kw,
        "decided_by": rec.decided_by.value,
        **{k: getattr(rec, k) for k in INSTANCE_KEYS},  # its instances: what the counts count
    }
    shortfall: dict[str, object] = {
        "slo": rec.binding_slo or None,
        "margin": None if not math.isfinite(margin) else round(margin, 6),
        # how far the binding percentile is above its limit (value / limit − 1)
        "over_limit": None
        if not math.isfinite(margin) or margin <= -1
        else round(1.0 / (1.0 + margin) - 1.0, 6),
        "unstable": not math.isfinite(margin),
    }
    return replace(res, closest=closest, shortfall=shortfall, limited_by=limited)


__all__ = ["capacity_estimate", "closest_record", "derive_range", "explain_limits", "on_edge", "widened"]
