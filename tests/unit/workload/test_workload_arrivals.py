"""Arrival processes: rates, burstiness, limits, determinism, validation."""

from __future__ import annotations

import numpy as np
import pytest

from splitplan.errors import InputError
from splitplan.workload import gamma_arrivals, poisson_arrivals, replay_arrivals


def test_poisson_rate_and_bounds() -> None:
    t = poisson_arrivals(100.0, np.random.default_rng(0), duration_s=200.0)
    assert abs(len(t) / 200.0 - 100.0) < 3 * np.sqrt(100 / 200) * 3
    assert t[0] > 0
    assert t[-1] < 200.0
    assert np.all(np.diff(t) >= 0)
    gaps = np.diff(t)
    assert abs(np.std(gaps) / np.mean(gaps) - 1.0) < 0.03


def test_poisson_request_count_and_both_limits() -> None:
    t = poisson_arrivals(10.0, np.random.default_rng(0), requests=123)
    assert len(t) == 123
    t2 = poisson_arrivals(10.0, np.random.default_rng(0), duration_s=1e6, requests=50)
    assert len(t2) == 50
    t3 = poisson_arrivals(10.0, np.random.default_rng(0), duration_s=2.0, requests=10_000)
    assert len(t3) < 100
    assert t3[-1] < 2.0


@pytest.mark.parametrize("cv", [0.5, 2.0, 4.0])
def test_gamma_cv(cv: float) -> None:
    t = gamma_arrivals(50.0, cv, np.random.default_rng(1), requests=200_000)
    gaps = np.diff(t)
    assert abs(np.mean(gaps) * 50.0 - 1.0) < 0.03
    assert abs(np.std(gaps) / np.mean(gaps) - cv) / cv < 0.05


def test_bit_identical_and_seed_sensitive() -> None:
    a = gamma_arrivals(70.0, 2.0, np.random.default_rng(5), duration_s=60.0)
    b = gamma_arrivals(70.0, 2.0, np.random.default_rng(5), duration_s=60.0)
    c = gamma_arrivals(70.0, 2.0, np.random.default_rng(6), duration_s=60.0)
    assert a.tobytes() == b.tobytes()
    assert a.tobytes() != c.tobytes()


def test_replay_rescale_and_truncate() -> None:
    ts = np.array([10.0, 11.0, 13.0, 14.0, 20.0])  # span 10 s, 4 gaps → 0.4 req/s
    np.testing.assert_array_equal(replay_arrivals(ts), ts)
    r = replay_arrivals(ts, rate_rps=0.8)
    np.testing.assert_allclose(r, [0.0, 0.5, 1.5, 2.0, 5.0])
    np.testing.assert_allclose(replay_arrivals(ts, rate_rps=0.8, duration_s=1.6), [0.0, 0.5, 1.5])
    assert len(replay_arrivals(ts, requests=2)) == 2
    with pytest.raises(InputError):
        replay_arrivals([3.0, 3.0], rate_rps=1.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"rate_rps": 0.0, "duration_s": 1.0},
        {"rate_rps": -1.0, "duration_s": 1.0},
        {"rate_rps": float("nan"), "duration_s": 1.0},
        {"rate_rps": 1.0, "duration_s": 0.0},
        {"rate_rps": 1.0},
        {"rate_rps": 1.0, "requests": 0},
        {"rate_rps": 1e9, "duration_s": 1e9},
    ],
)
def test_validation(kwargs: dict) -> None:
    rate = kwargs.pop("rate_rps")
    with pytest.raises(InputError):
        poisson_arrivals(rate, np.random.default_rng(0), **kwargs)


def test_gamma_cv_validation() -> None:
    with pytest.raises(InputError, match="cv"):
        gamma_arrivals(1.0, 0.0, np.random.default_rng(0), duration_s=1.0)
