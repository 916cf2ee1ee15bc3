"""Arrival processes: Poisson, bursty (gamma inter-arrivals), and replay of recorded timestamps.

Every generator takes an explicit numpy Generator, so the same seed gives bit-identical times. Times
are in seconds after the start; the first request arrives one gap after 0 (as in the reference
simulator's traces).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from splitplan.errors import InputError

ARRIVALS = ("poisson", "gamma", "replay")
MAX_REQUESTS = 50_000_000  # a guard against typos like --rate 1e9
# gamma gaps' coefficient of variation: outside it the gamma's shape 1/cv² underflows or overflows
# (cv 1e-300 divided by zero) long before any arrival process a fleet sees
GAMMA_CV_RANGE = (1e-3, 1e3)


def _check_positive(name: str, value: float | None, *, required: bool = False) -> None:
    if value is None:
        if required:
            raise InputError(f"{name} is required")
        return
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InputError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(float(value)) or value <= 0:
        raise InputError(f"{name} must be a finite number > 0, got {value}")


def _check_limits(rate_rps: float, duration_s: float | None, requests: int | None) -> None:
    _check_positive("rate_rps", rate_rps, required=True)
    _check_positive("duration_s", duration_s)
    if requests is not None:
        if isinstance(requests, bool) or not isinstance(requests, (int, np.integer)) or requests < 1:
            raise InputError(f"requests must be an integer ≥ 1, got {requests!r}")
        if requests > MAX_REQUESTS:
            raise InputError(f"requests = {requests} exceeds the limit of {MAX_REQUESTS:,}")
    if duration_s is None and requests is None:
        raise InputError("give a duration (duration_s) or a request count (requests)")
    if requests is None and rate_rps * duration_s > MAX_REQUESTS:  # type: ignore[operator]
        raise InputError(f"rate {rate_rps} req/s over {duration_s} s is more than {MAX_REQUESTS:,} requests")


def _renewal(
    gaps_of,
    rate_rps: float,
    duration_s: float | None,
    requests: int | None,
) -> npt.NDArray[np.float64]:
    """Cumulated gaps, drawn in blocks until `requests` are reached or `duration_s` is passed."""
    if requests is not None and duration_s is None:
        return np.cumsum(gaps_of(requests))
    expected = rate_rps * duration_s  # type: ignore[operator]
    block = int(expected + 6 * math.sqrt(expected) + 16)
    if requests is not None:
        block = min(block, requests)
    parts: list[npt.NDArray[np.float64]] = []
    last = 0.0
    count = 0
    while True:
        t = last + np.cumsum(gaps_of(block))
        parts.append(t)
        count += len(t)
        last = float(t[-1])
        if last >= duration_s or (requests is not None and count >= requests):  # type: ignore[operator]
            break
    out = np.concatenate(parts) if len(parts) > 1 else parts[0]
    out = out[out < duration_s]  # type: ignore[operator]
    if requests is not None:
        out = out[:requests]
    return out


def poisson_arrivals(
    rate_rps: float, rng: np.random.Generator, *, duration_s: float | None = None, requests: int | None = None
) -> npt.NDArray[np.float64]:
    """Poisson arrivals at `rate_rps` until `duration_s` (exclusive) and/or `requests` are reached."""
    _check_limits(rate_rps, duration_s, requests)
    scale = 1.0 / rate_rps
    return _renewal(lambda k: rng.exponential(scale, size=k), rate_rps, duration_s, requests)


def gamma_arrivals(
    rate_rps: float,
    cv: float,
    rng: np.random.Generator,
    *,
    duration_s: float | None = None,
    requests: int | None = None,
) -> npt.NDArray[np.float64]:
    """Bursty arrivals: gamma inter-arrival gaps with mean 1/rate and coefficient of variation `cv`.

    cv = 1 is Poisson; cv > 1 is burstier, cv < 1 more regular.
    """
    _check_limits(rate_rps, duration_s, requests)
    _check_positive("cv", cv, required=True)
    if not GAMMA_CV_RANGE[0] <= cv <= GAMMA_CV_RANGE[1]:
        lo, hi = GAMMA_CV_RANGE
        raise InputError(f"cv must be between {lo:g} and {hi:g} (1 is Poisson), got {cv:g}")
    shape = 1.0 / (cv * cv)
    scale = 1.0 / (rate_rps * shape)
    return _renewal(lambda k: rng.gamma(shape, scale, size=k), rate_rps, duration_s, requests)


def replay_arrivals(
    timestamps_s: npt.ArrayLike,
    *,
    rate_rps: float | None = None,
    duration_s: float | None = None,
    requests: int | None = None,
) -> npt.NDArray[np.float64]:
    """A trace's own times, shifted to start at its first request and optionally rescaled.

    With `rate_rps`, gaps are stretched so that the mean arrival rate ((n-1)/span) becomes rate_rps;
    burstiness is kept. Truncated to times < duration_s and/or the first `requests`.
    """
    t = np.asarray(timestamps_s, dtype=np.float64)
    if t.ndim != 1 or len(t) == 0:
        raise InputError("replay needs a non-empty 1-D array of timestamps")
    _check_positive("rate_rps", rate_rps)
    _check_positive("duration_s", duration_s)
    if requests is not None and (
        isinstance(requests, bool) or not isinstance(requests, (int, np.integer)) or requests < 1
    ):
        raise InputError(f"requests must be an integer ≥ 1, got {requests!r}")
    out = t - t[0] if rate_rps is not None else t.copy()
    if rate_rps is not None:
        span = float(out[-1])
        if len(out) < 2 or span <= 0:
            raise InputError("cannot rescale a trace whose requests all arrive at the same time")
        out = out * ((len(out) - 1) / (span * rate_rps))
    if duration_s is not None:
        out = out[out < duration_s]  # type: ignore[operator]
    if requests is not None:
        out = out[:requests]
    return out
