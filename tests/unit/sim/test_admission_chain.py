"""The prompt pool's admission chain in closed-form pieces equals the chain solved state by state.

`analytic._chain_position` solves the birth–death chain of the DES's "full" rule in pieces (a
truncated Poisson below c, straight pieces of the admission products between c and 2c, one
geometric run per queue level above), so that its cost does not grow with the pool size. Here the
same chain is solved the plain way — every state's probability from the birth and death rates,
then the inverse of the piecewise-linear cumulative — and the two must agree.
"""

from __future__ import annotations

import numpy as np
import pytest

from splitplan.sim import analytic

# the pieces between c and 2c follow the admission products within 1e-4 in log: positions agree
# to a small fraction of a state (exact pieces elsewhere agree to rounding)
POSITION_TOLERANCE = 0.05


def _workload(mean_log: float, sd_log: float, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = rng.lognormal(mean_log, sd_log, size=4000).clip(1, 8000)
    service = 0.02 + p * 1e-5
    full = 8192.0
    room = full - (1.0 + np.arange(65)) * p.mean()
    order = np.argsort(p)
    work = np.cumsum(service[order])
    at = np.searchsorted(p[order], room, side="right")
    fits = np.where(at > 0, work[np.maximum(at - 1, 0)], 0.0) / work[-1]
    fits[0] = 1.0
    return p, service, fits


def _dense_position(c: int, offered: float, fits: np.ndarray, qf, u: np.ndarray) -> np.ndarray:
    """The chain state by state: π_{n+1} = π_n · λ·admit(n) / (min(n + 1, c)/E[S])."""
    top = int(np.flatnonzero(fits > 0)[-1])
    n_states = c * (top + 2) + 1
    h = np.zeros(n_states)
    h[c + 1 : 2 * c] = qf.table(c)
    admit = np.ones(n_states)
    for n in range(n_states):
        level = (n - c) // c
        if c < n < 2 * c:
            admit[n] = 1.0 - h[n] * (1.0 - fits[1])
        elif level >= 1:
            admit[n] = fits[level] if level <= top else 0.0
    logp = np.zeros(n_states)
    for n in range(1, n_states):
        logp[n] = logp[n - 1] + np.log(max(admit[n - 1], 1e-300) * offered) - np.log(min(n, c))
    pi = np.exp(logp - logp.max())
    cum = np.cumsum(pi) / pi.sum()
    state = np.minimum(np.searchsorted(cum, u, side="left"), n_states - 1)
    lo = np.where(state > 0, cum[np.maximum(state - 1, 0)], 0.0)
    return state + np.clip((u - lo) / np.maximum(cum[state] - lo, 1e-300), 0.0, 1.0)


@pytest.mark.parametrize("shape", [(7.0, 1.0), (5.5, 0.8)], ids=["long-prompts", "many-levels"])
def test_pieces_equal_the_state_by_state_chain(shape: tuple[float, float]) -> None:
    p, service, fits = _workload(*shape, seed=1)
    qf = analytic._QueueFirst(p, service, float(fits[1]))
    rng = np.random.default_rng(2)
    u = (np.arange(300) + rng.random(300)) / 300
    rng.shuffle(u)
    servers = np.array([1, 2, 3, 5, 17, 40, 100, 333, 7, 40])
    rho = np.array([0.3, 0.9, 1.0, 1.1, 0.97, 0.7, 1.02, 0.99, 3.0, 5.0])
    got = analytic._chain_position(servers, rho * servers, fits, qf, u)
    for i, (c, r) in enumerate(zip(servers, rho, strict=True)):
        want = _dense_position(int(c), float(r * c), fits, qf, u)
        queued = want >= c  # below c the chain's state is not used (no wait, no overflow)
        assert np.array_equal(got[i] >= c, queued), (c, r)
        err = np.abs(got[i] - want)[queued]
        assert err.size == 0 or err.max() < POSITION_TOLERANCE, (c, r, err.max())


def test_a_row_does_not_depend_on_the_rows_beside_it() -> None:
    p, service, fits = _workload(7.0, 1.0, seed=3)
    qf = analytic._QueueFirst(p, service, float(fits[1]))
    u = (np.arange(200) + 0.5) / 200
    servers = np.array([3, 250, 40, 1200, 9])
    offered = np.array([2.5, 240.0, 41.0, 1100.0, 30.0])
    together = analytic._chain_position(servers, offered, fits, qf, u)
    for i in range(len(servers)):
        alone = analytic._chain_position(servers[i : i + 1], offered[i : i + 1], fits, qf, u)
        assert np.array_equal(alone[0], together[i])


def test_the_cost_per_point_does_not_grow_with_the_pool() -> None:
    """The pieces per point are bounded whatever c is (the dense chain had c·(levels + 2))."""
    p, service, fits = _workload(7.0, 1.0, seed=4)
    qf = analytic._QueueFirst(p, service, float(fits[1]))
    for c in (10, 1_000, 65_536):
        knots, _ = qf.runs(c)
        assert len(knots) - 1 <= analytic._ADMIT_RUNS_MAX
        assert knots[0] == 0
        assert knots[-1] == c
    # a pool of 65,536 machines at 99 % load is placed without a state-sized array
    pos = analytic._chain_position(
        np.array([65_536]), np.array([0.99 * 65_536]), fits, qf, np.array([0.5, 0.999])
    )
    assert np.all(np.isfinite(pos))
