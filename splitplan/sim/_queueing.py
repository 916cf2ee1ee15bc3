"""Layer 4: vectorized queueing formulas used by the analytic evaluator.

Everything broadcasts over numpy arrays of configuration points; no Python loop over points.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def erlang_b(servers: npt.ArrayLike, offered: npt.ArrayLike) -> FloatArray:
    """Probability that an arrival finds every server busy in an M/M/c/c loss system (Erlang B).

    `servers` = c (integers ≥ 1), `offered` = a = λ·E[S] (erlangs), vectorized over points. Erlang
    B is a Poisson ratio, B(c, a) = P(K = c) / P(K ≤ c) for K ~ Poisson(a), with P(K ≤ c) =
    Q(c + 1, a) (regularized upper incomplete gamma) and P(K = c) from log-gamma: a fixed number of
    operations per point whatever c is (the Erlang-B recursion takes c steps, so its cost grew with
    the largest pool of a chunk). Where a is so far above c that both Poisson terms underflow, the
    series of 1/B in c/a takes over. Agrees with the recursion to ~1e-9 relative
    (tests/unit/sim/test_analytic.py); 0 where a is 0.
    """
    from scipy.special import gammaincc, gammaln

    c = np.asarray(servers, dtype=np.int64)
    a = np.asarray(offered, dtype=np.float64)
    c, a = np.broadcast_arrays(c, a)
    b = np.zeros(a.shape)
    live = a > 0.0
    if live.any():
        cl, al = c[live].astype(np.float64), a[live]
        log_pmf = cl * np.log(al) - al - gammaln(cl + 1.0)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            ratio = np.exp(log_pmf) / gammaincc(cl + 1.0, al)
        # far above the servers both terms fall into (or below) the subnormal range
        far = ~np.isfinite(ratio) | ((log_pmf < -700.0) & (al > cl))
        if far.any():
            ratio[far] = 1.0 / _inverse_erlang_b_series(cl[far], al[far])
        b[live] = ratio
    return b


def _inverse_erlang_b_series(c: FloatArray, a: FloatArray) -> FloatArray:
    # 1/B(c, a) = Σ_{j=0..c} c!/(c − j)! · a^−j, summed until its terms vanish: used only where the
    # Poisson terms underflow, far above the servers (a > 2c below ~2,000 servers), where a term is
    # less than the one before by c/a: a few dozen to a few hundred terms
    total = np.ones_like(a)
    term = np.ones_like(a)
    for j in range(1, int(c.max()) + 1):
        term *= np.maximum(c - (j - 1), 0.0) / a
        total += term
        if float(term.max()) < 1e-17:
            break
    return total


def erlang_c(servers: npt.ArrayLike, offered: npt.ArrayLike) -> FloatArray:
    """Probability that an arrival waits in an M/M/c queue (Erlang C), vectorized over points.

    `servers` = c (integers ≥ 1), `offered` = a = λ·E[S] (erlangs). C = B / (1 − ρ(1 − B)) from
    Erlang B (`erlang_b`); returns 1 where a ≥ c (overloaded).
    """
    c = np.asarray(servers, dtype=np.int64)
    a = np.asarray(offered, dtype=np.float64)
    c, a = np.broadcast_arrays(c, a)
    cf = c.astype(np.float64)
    rho = np.divide(a, cf, out=np.full(a.shape, np.inf), where=c > 0)
    live = (rho < 1.0) & (a > 0.0)  # elsewhere C is 1 (overload) or 0 (no load)
    b = np.zeros(a.shape)
    if live.any():
        b[live] = erlang_b(c[live], a[live])
    with np.errstate(divide="ignore", invalid="ignore"):
        pw = b / (1.0 - rho * (1.0 - b))
    return np.where(rho >= 1.0, 1.0, np.clip(pw, 0.0, 1.0))


def mgc_wait(
    arrival_rate: npt.ArrayLike,
    mean_service_s: npt.ArrayLike,
    service_scv: npt.ArrayLike,
    servers: npt.ArrayLike,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """M/G/c waiting time by Allen–Cunneen: (P(wait > 0), mean wait given waiting, utilization).

    The wait is modelled as 0 with probability 1 − C and exponential otherwise, with the
    Allen–Cunneen mean E[W] = C/(cμ − λ) · (1 + c_s²)/2 (Poisson arrivals, c_a² = 1).
    Overloaded points (ρ ≥ 1) return ρ and an infinite conditional wait; callers handle them.
    """
    lam = np.asarray(arrival_rate, dtype=np.float64)
    es = np.asarray(mean_service_s, dtype=np.float64)
    c = np.asarray(servers, dtype=np.float64)
    offered = lam * es
    rho = np.divide(offered, c, out=np.full(np.broadcast(offered, c).shape, np.inf), where=c > 0)
    pw = erlang_c(np.asarray(servers, dtype=np.int64), offered)
    slack = c / np.maximum(es, 1e-300) - lam  # cμ − λ
    with np.errstate(divide="ignore", invalid="ignore"):
        cond = np.where(rho < 1.0, (1.0 + np.asarray(service_scv)) / 2.0 / slack, np.inf)
    return pw, cond, rho


def bisect_increasing(
    fn: Callable[[FloatArray], FloatArray], lo: FloatArray, hi: FloatArray, steps: int = 40
) -> FloatArray:
    """Root of an increasing function per point by bisection on [lo, hi] (vectorized).

    Where fn(hi) < 0 the result is hi (no root inside: the caller flags overload).
    """
    lo = np.array(lo, dtype=np.float64, copy=True)
    hi = np.array(hi, dtype=np.float64, copy=True)
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        neg = fn(mid) < 0.0
        lo = np.where(neg, mid, lo)
        hi = np.where(neg, hi, mid)
    return 0.5 * (lo + hi)
