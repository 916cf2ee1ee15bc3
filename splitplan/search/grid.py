"""Layer 5: cost/power search over the (prompt, token) grid of one design — exhaustive DES, analytic
only, or hybrid (analytic screen, DES decisions, dominance).

Hybrid exactness. Assume DES feasibility is monotone: adding a machine to either pool never breaks
an SLO. Then the infeasible points form a down-set whose boundary is t*(p), the fewest token
machines that pass with p prompt machines (non-increasing in p). The hybrid finds t*(p) for every
column with the DES, using the analytic screen only to *guess* where to probe (galloping search
from the guess, then bisection). Each grid point is then decided by the DES itself or by
dominance from a DES-decided point (p' ≥ p, t' ≥ t infeasible ⇒ (p, t) infeasible; p' ≤ p, t' ≤ t
feasible ⇒ feasible), so under monotonicity the result equals an exhaustive DES sweep whatever
the analytic error. Monotonicity can fail by a hair near the frontier (one more machine reorders
a queue); as a guard, every dominance-infeasible point that is cheaper than the optimum is
re-checked with the DES when its analytic margin is above −band, or when every DES-infeasible
point that dominates it failed by less than WITNESS_MARGIN and one of them is at most
WITNESS_REACH machines away (a near miss is weak evidence for its close neighbours: with one token
machine, say, the DES can fail at 31 prompt machines by 6 % and pass at 29). With band = ∞ the
answer is exact without any assumption; with band = 0.3 it is exact unless the DES is non-monotone
at a point the analytic screen misjudges by more than 30 % and that not only near misses dominate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from splitplan.design import Design
from splitplan.search.evaluate import Decision, Evaluator, Screen
from splitplan.search.store import point_key

Point = tuple[int, int]
# A DES-infeasible point that failed by less than this (relative headroom of its binding SLO)
# does not settle the points up to WITNESS_REACH machines below it by itself: they are re-checked
# when cheaper than the optimum.
WITNESS_MARGIN = 0.1
WITNESS_REACH = 2


class PointKey(NamedTuple):
    """Which DES verdict: a design space's point (pools, counts) at a rate factor.

    Typed in the search; `encoded()` is the store's string form (search.store.point_key).
    """

    space: str
    prompt_gpu: str  # the pool's instance name (GPU type, TP and precision when not whole-node)
    token_gpu: str
    prompt_power_cap: float
    token_power_cap: float
    prompt_machines: int
    token_machines: int
    rate_factor: float

    def encoded(self) -> str:
        return point_key(*self)


@dataclass(slots=True)
class CachedEvaluator:
    """Serves known DES verdicts, evaluates the rest once; `sink` persists new ones at once.

    `known` is keyed by the store's encoded keys (what `PointStore.snapshot` returns).
    """

    inner: Evaluator
    space: str
    known: dict[str, Decision] = field(default_factory=dict)
    sink: Callable[[PointKey, Decision], None] | None = None
    fresh: dict[PointKey, Decision] = field(default_factory=dict)
    # the inner evaluator's stop_below_headroom: a search that needs only the verdict of a clear
    # failure lets the DES stop there (search.frontier.STOP_BELOW_HEADROOM); None runs to the end
    stop_below_headroom: float | None = None

    @property
    def new(self) -> int:
        return len(self.fresh)

    def key(self, design: Design, p: int, t: int, factor: float) -> PointKey:
        return PointKey(
            self.space,
            design.prompt.instance_name,
            design.token.instance_name,
            float(design.prompt.power_cap),
            float(design.token.power_cap),
            int(p),
            int(t),
            float(factor),
        )

    def decide(self, design: Design, p: int, t: int, factor: float) -> Decision:
        k = self.key(design, p, t, factor)
        code = k.encoded()
        d = self.known.get(code)
        if d is None or not d.answers(self.stop_below_headroom):
            d = self.inner.decide(
                design, int(p), int(t), factor, stop_below_headroom=self.stop_below_headroom
            )
            self.known[code] = d
            self.fresh[k] = d
            if self.sink is not None:
                self.sink(k, d)
        return d


def threshold(lo: int, hi: int, guess: int, probe: Callable[[int], bool], *, bisect: bool = False) -> int:
    """Smallest x in (lo, hi) with probe(x) true, given probe false at ≤ lo and true at ≥ hi.

    `hi` may be a sentinel one past the range (never probed); the return value is then hi when
    nothing in range passes. Gallops from `guess` with doubling steps, then bisects; with
    `bisect`, bisects from the start (`guess` unused): for a guess that the probes have already
    shown wrong by an unknown amount, where galloping costs about 2·log2 of its error.
    """
    seen_ok = seen_bad = bisect
    x, step = guess, 1
    while hi - lo > 1:
        if seen_ok and seen_bad:
            x = (lo + hi) // 2
        x = min(max(x, lo + 1), hi - 1)
        if probe(x):
            hi, seen_ok = x, True
            x = hi - step
        else:
            lo, seen_bad = x, True
            x = lo + step
        step *= 2
    return hi


def first_passing(margin_col: np.ndarray, values: np.ndarray, sentinel: int) -> int:
    ok = np.nonzero(margin_col >= 0.0)[0]
    return int(values[ok[0]]) if len(ok) else sentinel


def walk_columns(
    evaluator: CachedEvaluator,
    design: Design,
    ps: list[int],
    t_range: tuple[int, int],
    guesses: list[int],
    factor: float,
) -> tuple[dict[Point, Decision], dict[PointKey, Decision]]:
    """Find t*(p) for each p in `ps` (walked in descending order), sharing dominance between columns.

    Top-level and picklable: one task per design column block. Returns every DES verdict used.
    """
    t_lo, t_hi = t_range
    seen: dict[Point, Decision] = {}

    def probe_at(p: int) -> Callable[[int], bool]:
        def probe(t: int) -> bool:
            d = evaluator.decide(design, p, t, factor)
            seen[(p, t)] = d
            return d.meets

        return probe

    order = sorted(zip(ps, guesses, strict=True), reverse=True)
    for p, g in order:
        lo = max([t for (pp, t), d in seen.items() if not d.meets and pp >= p] + [t_lo - 1])
        hi = min([t for (pp, t), d in seen.items() if d.meets and pp <= p] + [t_hi + 1])
        threshold(lo, hi, g, probe_at(p))
    return seen, evaluator.fresh


def walk_line(
    evaluator: CachedEvaluator, design: Design, n_range: tuple[int, int], guess: int, factor: float
) -> tuple[dict[Point, Decision], dict[PointKey, Decision]]:
    """Baselines: the fewest machines N* that pass (one threshold search)."""
    seen: dict[Point, Decision] = {}

    def probe(n: int) -> bool:
        d = evaluator.decide(design, n, 0, factor)
        seen[(n, 0)] = d
        return d.meets

    threshold(n_range[0] - 1, n_range[1] + 1, guess, probe)
    return seen, evaluator.fresh


def decide_points(
    evaluator: CachedEvaluator, design: Design, points: list[Point], factor: float
) -> tuple[dict[Point, Decision], dict[PointKey, Decision]]:
    """DES every point of a chunk (exhaustive sweeps and the hybrid's verification pass)."""
    out = {pt: evaluator.decide(design, pt[0], pt[1], factor) for pt in points}
    return out, evaluator.fresh


@dataclass(frozen=True, slots=True)
class Grid:
    """The points of one design's count space, as flat arrays in (p, t) row-major order."""

    p_values: np.ndarray
    t_values: np.ndarray  # [0] for baselines

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.p_values), len(self.t_values)

    @property
    def flat(self) -> tuple[np.ndarray, np.ndarray]:
        pp, tt = np.meshgrid(self.p_values, self.t_values, indexing="ij")
        return pp.ravel().astype(np.int64), tt.ravel().astype(np.int64)


def make_grid(p_range: tuple[int, int], t_range: tuple[int, int], baseline: bool) -> Grid:
    p = np.arange(p_range[0], p_range[1] + 1, dtype=np.int64)
    t = np.array([0], dtype=np.int64) if baseline else np.arange(t_range[0], t_range[1] + 1, dtype=np.int64)
    return Grid(p_values=p, t_values=t)


def _des_grid(grid: Grid, decided: dict[Point, Decision]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ok, bad, DES margin) over the grid from the DES-decided points (margin NaN elsewhere)."""
    n_p, n_t = grid.shape
    p_index = {int(v): i for i, v in enumerate(grid.p_values)}
    t_index = {int(v): j for j, v in enumerate(grid.t_values)}
    ok = np.zeros((n_p, n_t), dtype=bool)
    bad = np.zeros((n_p, n_t), dtype=bool)
    margin = np.full((n_p, n_t), np.nan)
    for (p, t), d in decided.items():
        if p in p_index and t in t_index:
            (ok if d.meets else bad)[p_index[p], t_index[t]] = True
            margin[p_index[p], t_index[t]] = d.margin
    return ok, bad, margin


def near_miss_only(grid: Grid, decided: dict[Point, Decision]) -> np.ndarray:
    """Per point (flat): every DES-infeasible point that dominates it (p' ≥ p, t' ≥ t) failed by
    less than WITNESS_MARGIN, and one of them is at most WITNESS_REACH machines away."""
    _ok, bad, margin = _des_grid(grid, decided)
    w = np.where(bad, margin, np.inf)[::-1, ::-1]
    strongest = np.minimum.accumulate(np.minimum.accumulate(w, axis=0), axis=1)[::-1, ::-1]
    near_miss = bad & (margin > -WITNESS_MARGIN)
    close = np.zeros_like(bad)
    n_p, n_t = bad.shape
    for a in range(WITNESS_REACH + 1):
        for b in range(WITNESS_REACH + 1 - a):
            close[: n_p - a, : n_t - b] |= near_miss[a:, b:]
    return (close & (strongest > -WITNESS_MARGIN)).ravel()


def classify(grid: Grid, decided: dict[Point, Decision]) -> tuple[np.ndarray, np.ndarray]:
    """(meets, how) over the grid (shape grid.shape): how = 0 des, 1 dominance, 2 undecided/conflict."""
    ok, bad, _margin = _des_grid(grid, decided)
    # feasible if some DES-feasible point is ≤ componentwise; infeasible if some DES-infeasible is ≥
    up = np.maximum.accumulate(np.maximum.accumulate(ok, axis=0), axis=1)
    down = np.maximum.accumulate(np.maximum.accumulate(bad[::-1, ::-1], axis=0), axis=1)[::-1, ::-1]
    direct = ok | bad
    meets = np.where(direct, ok, up & ~down)
    how = np.where(direct, 0, np.where(up ^ down, 1, 2))
    return meets, how


def verify_candidates(
    how: np.ndarray,
    meets: np.ndarray,
    ok_budget: np.ndarray,
    obj: np.ndarray,
    margin: np.ndarray,
    best_obj: float,
    band: float,
    near_miss: np.ndarray | None = None,
) -> np.ndarray:
    """Flat indices the hybrid re-checks with the DES: undecided points, and dominance-infeasible
    points no dearer than the optimum whose analytic margin is within the band or that only close
    near misses dominate (`near_miss_only`)."""
    undecided = how == 2
    doubtful = margin >= -band
    if near_miss is not None:
        doubtful |= near_miss
    # ties count too: a tied point may win the tie-break (fewer machines, then fewer prompt machines)
    suspicious = (how == 1) & ~meets & ok_budget & (obj <= best_obj + 1e-9) & doubtful
    return np.nonzero(undecided | suspicious)[0]


def guesses_for(grid: Grid, screen: Screen | None) -> list[int]:
    """Analytic guess of t*(p) (or N* for a baseline) per column; mid-range without a screen."""
    n_p, n_t = grid.shape
    hi = int(grid.t_values[-1]) + 1
    if screen is None:
        mid = int(grid.t_values[n_t // 2])
        return [mid] * n_p
    m = screen.margin.reshape(n_p, n_t)
    return [first_passing(m[i], grid.t_values, hi) for i in range(n_p)]


def baseline_guess(grid: Grid, screen: Screen | None) -> int:
    if screen is None:
        return int(grid.p_values[len(grid.p_values) // 2])
    return first_passing(screen.margin, grid.p_values, int(grid.p_values[-1]) + 1)
