"""Layer 5: rate primitives of the throughput objective, shared by its grid and Optuna strategies.

Rates are factors of the scenario's rate (arrival times ÷ factor). Candidate splits under a budget
are the maximal affordable ones (throughput cannot fall when a machine is added). The analytic
screen brackets each split's rate (vectorized bisection over all splits at once); the DES then
bisects from that bracket to a relative tolerance, on a fixed lattice of rates.
"""

from __future__ import annotations

import math

import numpy as np

from splitplan.design import Design
from splitplan.search.evaluate import Decision, Evaluator
from splitplan.search.grid import CachedEvaluator, PointKey, threshold

F_MIN, F_MAX = 1.0 / 64.0, 64.0  # rate factors outside this range are reported as the bound


def maximal_splits(
    p_values: np.ndarray, t_values: np.ndarray, affordable: np.ndarray
) -> list[tuple[int, int]]:
    """Affordable points not dominated by another affordable point (affordable: (n_p, n_t) bool)."""
    out: list[tuple[int, int]] = []
    n_p = affordable.shape[0]
    t_max = np.full(n_p, -1)
    for i in range(n_p):
        ok = np.nonzero(affordable[i])[0]
        if len(ok):
            t_max[i] = ok[-1]
    for i in range(n_p):
        if t_max[i] < 0:
            continue
        if i + 1 < n_p and t_max[i + 1] >= t_max[i]:
            continue  # (p+1, same t) is affordable and dominates
        out.append((int(p_values[i]), int(t_values[t_max[i]])))
    return out


def analytic_rates(
    evaluator: Evaluator, design: Design, splits: list[tuple[int, int]], tol: float
) -> np.ndarray:
    """Highest passing rate factor per split by the analytic screen (0 if none ≥ F_MIN)."""
    if not splits:
        return np.zeros(0)
    p = np.array([s[0] for s in splits], dtype=np.int64)
    t = np.array([s[1] for s in splits], dtype=np.int64)
    levels = np.geomspace(F_MIN, F_MAX, 49)
    k = len(levels)
    scr = evaluator.screen(design, np.repeat(p, k), np.repeat(t, k), np.tile(levels, len(splits)))
    ok = (scr.margin >= 0).reshape(len(splits), k)
    # first failing level; the bracket is the level before it
    first_bad = np.where(~ok.all(axis=1), np.argmin(ok, axis=1), k)
    lo = np.where(first_bad > 0, levels[np.maximum(first_bad - 1, 0)], 0.0)
    hi = np.where(first_bad < k, levels[np.minimum(first_bad, k - 1)], F_MAX)
    active = (lo > 0) & (first_bad < k)
    while active.any() and np.max(hi[active] / lo[active]) > 1 + tol / 4:
        mid = np.sqrt(np.where(active, lo, 1.0) * np.where(active, hi, 1.0))
        idx = np.nonzero(active)[0]
        m = evaluator.screen(design, p[idx], t[idx], mid[idx]).margin >= 0
        lo[idx] = np.where(m, mid[idx], lo[idx])
        hi[idx] = np.where(m, hi[idx], mid[idx])
        active = active & (hi / np.where(lo > 0, lo, 1.0) > 1 + tol / 4)
    return lo


def _round(f: float) -> float:
    return float(f"{f:.6g}")


def rate_lattice(tol: float) -> tuple[float, int, int]:
    """Rates are searched on the lattice (1 + tol)^k, k in [k_min, k_max] (factors F_MIN..F_MAX).

    On a fixed lattice the highest passing rate is one definite point whatever the search starts
    from, so the hybrid and the exhaustive engines return the same rate, not two within tolerance.
    """
    r = 1.0 + tol
    return r, math.ceil(math.log(F_MIN) / math.log(r)), math.floor(math.log(F_MAX) / math.log(r))


def bisect_rate(
    evaluator: CachedEvaluator, design: Design, p: int, t: int, guess: float, tol: float
) -> tuple[float, Decision | None, dict[float, Decision], int]:
    """Highest DES-passing rate factor on the (1 + tol)^k lattice for one split, from `guess`.

    Returns (factor, verdict at that factor, every probe, new DES evaluations). Factor 0 means
    nothing passes at F_MIN. Gallops from the guess, then bisects (see grid.threshold).
    """
    probes: dict[float, Decision] = {}
    r, k_min, k_max = rate_lattice(tol)

    def factor(k: int) -> float:
        return _round(r**k)

    def fails(k: int) -> bool:
        f = factor(k)
        d = evaluator.decide(design, p, t, f)
        probes[f] = d
        return not d.meets

    k0 = math.floor(math.log(guess) / math.log(r) + 1e-9) if guess > 0 else k_min
    k0 = min(max(k0, k_min), k_max)
    k_fail = threshold(k_min - 1, k_max + 1, k0, fails)
    k_best = k_fail - 1
    if k_best < k_min:
        return 0.0, None, probes, evaluator.new
    f = factor(k_best)
    if f not in probes:  # k_best = k_min - 1 + ... only when the sentinel bounds were never probed
        fails(k_best)
    return f, probes[f], probes, evaluator.new


def bisect_many(
    evaluator: CachedEvaluator,
    design: Design,
    splits: list[tuple[int, int]],
    guesses: list[float],
    tol: float,
) -> tuple[list[tuple[float, Decision | None, dict[float, Decision]]], dict[PointKey, Decision]]:
    """A chunk of splits for one worker: per split (factor, verdict, probes), and the new verdicts."""
    out = []
    for (p, t), g in zip(splits, guesses, strict=True):
        f, d, probes, _ = bisect_rate(evaluator, design, p, t, g, tol)
        out.append((f, d, probes))
    return out, evaluator.fresh
