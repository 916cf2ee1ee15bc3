"""Layer 5: the hybrid search of a large count grid along its frontier, not over its area.

The whole-grid hybrid (search.grid, search.cost_grid) finds t*(p) — the fewest token machines
that pass with p prompt machines — in every column of the grid, and screens every point. Both grow
with the grid's area, i.e. with the square of the load. Here the work follows the frontier:

1. Screen. Per column, a bisection on t with the analytic screen (vectorized over all columns)
   gives the screen's t*(p): the DES's starting guess. A baseline's line is one bisection on N.
2. Frontier by bounds. Every searched column p bounds its threshold: t*(p) ∈ [low(p), up(p)]
   (exact when equal). Under monotonicity (a machine more never breaks an SLO), t* is
   non-increasing in p, so a column p not searched yet has floor(p) = max low(c) over searched
   c > p ≤ t*(p) ≤ ceil(p) = min up(c) over searched c < p, and the cheapest point it can offer is
   (p, floor(p)). A column whose (p, floor(p)) does not beat the best DES-feasible point so far
   (search.objective's one tie-break; the budget counts), or whose bounds meet, cannot hold the
   optimum (it is closed). Every round takes, between every two neighbouring searched columns,
   the middle open column, and searches it with the DES inside (floor − 1, ceil]:
   - up to its cap, the last t whose point (p, t) can still beat the best so far. Passing at the
     cap, t*(p) is found below it (galloping from the screen's guess, then bisecting): exact.
   - failing at the cap, the column cannot hold the optimum whatever its threshold; one more run
     at the top of its range (ceil − 1) says whether any t passes there. Failing there too,
     t*(p) = ceil exactly — a prompt pool too small for any token count closes every column left
     of it at once; passing, only t*(p) ∈ (cap, ceil − 1] is known, which is all the bounds need.
   Rounds end when no column is open. Under monotonicity the best DES-feasible point is then the
   optimum of the whole grid: a cheaper point lies in a searched column below its low(p) or above
   its cap, or in a closed column below its floor — infeasible or dearer in each case, whatever
   the analytic error. The DES work is O(log range) columns plus those whose cost is within one
   machine of the optimum, and per column O(log) runs, not a walk over the whole range.
3. Guard. As in the whole-grid hybrid, points cheaper than the optimum that only dominance
   declared infeasible are re-checked with the DES when their analytic margin is above −band or
   when only near misses or cliffs (a failure one machine below a pass whose margin is more than
   CLIFF_JUMP higher) dominate them (search.grid.WITNESS_MARGIN, WITNESS_REACH). The re-checks
   are limited to the `guard_depth(n)` points of each column just under the DES frontier (n the
   count there): one machine more or less reorders queues, which is what breaks monotonicity, and
   its effect on a pool of n machines shrinks as n grows, so a flip far below the frontier of a
   large pool would need the DES to be non-monotone by many machines at once. The exhaustive DES
   comparison in tests/golden/frontier_exhaustive.json checks this on cases from 20 to 300 req/s.

Non-monotonicity, measured. The guard covers flips of a few per cent of margin near the frontier
(a baseline at 3,000 req/s: N = 840 passes by 0.0002, 841 fails by 0.0005) and, through the cliff
rule, single failures wedged between passes. Splitwise-HH at 700 req/s on the coding preset
(120 s) has such flips: with 81 prompt machines, 9 token machines pass (TBT P90 headroom +0.09),
10 fail (−0.66: TBT P90 4.4× the unloaded TBT against 1.4× at 9 and 1.2× at 11) and 11 pass; with
83, 6 pass, 7 fail (−0.61) and 8 pass. The cliff rule re-checks the points just under such a
failure, but a flip that no probe lands next to stays unseen, and which side of one the search
lands on depends on its probes' path: galloping down column 81 from 11 it met the failure at 10
and answered 80P+10T; bisecting it (the screen's guess shown wrong, see `walk_column`) it meets
81P+9T and answers 83P+6T, $38/h cheaper. Where the DES flips like this, no search short of
simulating every point cheaper than its answer is exact, and the answer is a DES-verified feasible
point on the frontier the probes found. It is exact wherever the DES is monotone up to the guard,
which the exhaustive comparisons check.

Clear failures stop early. Most of a large search's DES runs fail by far (a column's cap on the
cost's level line, a pool too small for the load), and the search reads nothing of them but the
verdict, whether the margin is below −WITNESS_MARGIN (a near miss) and, beside a pass, whether it
is more than CLIFF_JUMP under it (a cliff). Its runs therefore stop as soon as some SLO is certain
to end with a headroom below STOP_BELOW_HEADROOM = −WITNESS_MARGIN (sim.des.run.failure_checks:
enough requests over the bound that the percentile is over it whatever the rest do), which tells
the first two. The third only matters where the guard's candidates depend on it: there
(`FrontierState.unsettled_cliffs`) the stopped failure is simulated again to the bound that tells
it (the pass's margin less CLIFF_JUMP) — stopping there it is a cliff, running to the end its
margin decides — so every rule above reads what it would from runs to the end: the answer and the
points simulated are those of runs to the end, a few of them run twice. Such points are written
with `des_stopped` and no margin or percentiles. At 3,000 req/s a failing run stops after 15–60 %
of its simulated time. A design with no passing point is explained by its closest miss: unless a
run to the end failed by less than the bound, its stopped run with the most machines is simulated
again to the end (search.cost_grid._settle_closest_miss).

Every task is a column's threshold or a chunk of guard points, so rounds run in parallel across
designs and intervals; the set of tasks of a round depends only on what earlier rounds found, so
the result is the same on any number of workers.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from splitplan.design import Design
from splitplan.search.evaluate import Decision, Evaluator
from splitplan.search.grid import WITNESS_MARGIN, WITNESS_REACH, CachedEvaluator, Point, PointKey, threshold
from splitplan.search.objective import Objective
from splitplan.search.problem import DesignSpace, SearchProblem

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

# Grids whose largest pool range ends above this many machines are searched along the frontier;
# up to it (the paper's 39 × 39 and 80-machine baselines) the whole-grid hybrid runs as before.
FULL_GRID_MAX_MACHINES = 100
# a DES failure one machine below a pass whose margin is this much higher is a weak witness
CLIFF_JUMP = 0.5
# guard depth: WITNESS_REACH + GUARD_SQRT · √n points under the frontier of a pool of n machines
GUARD_SQRT = 0.5
# DES runs stop once an SLO is certain to end with a headroom below this (module doc): a margin
# below it reads as a strong witness (< −WITNESS_MARGIN), as the run's own margin would; whether
# it is a cliff is settled where the guard needs it (FrontierState.unsettled_cliffs)
STOP_BELOW_HEADROOM = -WITNESS_MARGIN
_CLIFF_BOUND_SLACK = 1e-9

Key = tuple[float, float, float, int, int]
# prompt counts, token counts, margins, a cliff for certain, open, the bound that tells an open one
_Witnesses = tuple[IntArray, IntArray, npt.NDArray[np.float64], BoolArray, BoolArray, npt.NDArray[np.float64]]


class Column(NamedTuple):
    """One column's DES task: t*(p) in (lo, hi] — false at ≤ lo, true at ≥ hi (hi may be the
    sentinel t_hi + 1) — the search starting at `guess`; `cap` is the last count whose point can
    beat the best so far (see `walk_column`)."""

    p: int
    lo: int
    hi: int
    guess: int
    cap: int
    probe_top: bool = False  # hi is the sentinel t_hi + 1: a failure at the top closes columns


def use_frontier(problem: SearchProblem, space: DesignSpace) -> bool:
    """Whether the hybrid searches this space along its frontier (see the module doc)."""
    if problem.frontier is not None:
        return problem.frontier
    return max(space.prompt_range[1], space.token_range[1]) > FULL_GRID_MAX_MACHINES


def guard_depth(n: npt.ArrayLike) -> IntArray:
    """Points under the DES frontier of a pool of `n` machines that the guard re-checks."""
    return WITNESS_REACH + np.ceil(
        GUARD_SQRT * np.sqrt(np.maximum(np.asarray(n, dtype=np.float64), 0.0))
    ).astype(np.int64)


def screen_first_passing(
    ev: Evaluator,
    design: Design,
    fixed: IntArray,
    lo: int,
    hi: int,
    *,
    baseline: bool,
    level: float = 0.0,
    ways: int = 1,
) -> IntArray:
    """Per entry of `fixed` (prompt counts; ignored for a baseline's one line): the smallest count in
    [lo, hi] of the searched axis (token machines; a baseline's machines) whose analytic margin is
    ≥ `level`, hi + 1 when none — a search vectorized over the entries, taking the screen's margin
    as non-decreasing along the axis (machines added never hurt in the model). Each round screens
    `ways` counts per open entry, evenly spread over its bracket (1: a bisection); a baseline's one
    line takes many per round, since a screen call's fixed cost dwarfs its cost per point there."""
    n = len(fixed)
    below = np.full(n, lo - 1, dtype=np.int64)
    above = np.full(n, hi + 1, dtype=np.int64)
    # the top of the range first: an entry that fails there has no passing count at all
    first = True
    while True:
        act = np.nonzero(above - below > 1)[0]
        if not len(act):
            return above
        if first:
            mids = np.full((len(act), 1), hi, dtype=np.int64)
        else:
            gap = above[act] - below[act]
            k = np.minimum(ways, gap - 1)
            frac = np.arange(1, ways + 1, dtype=np.float64) / (k[:, None] + 1)
            mids = below[act, None] + np.floor(frac * gap[:, None]).astype(np.int64)
            mids = np.where(np.arange(ways)[None, :] < k[:, None], mids, above[act, None] - 1)
        first = False
        rows = np.repeat(act, mids.shape[1])
        flat = mids.ravel()
        if baseline:
            m = ev.screen(design, flat, np.zeros_like(flat), 1.0).margin
        else:
            m = ev.screen(design, fixed[rows], flat, 1.0).margin
        ok = (np.nan_to_num(np.asarray(m, dtype=np.float64), nan=-np.inf) >= level).reshape(mids.shape)
        # per entry: the lowest passing count screened this round bounds it from above, the highest
        # failing count below that bounds it from below (failing at hi in the first round: none)
        big = np.iinfo(np.int64).max
        up = np.where(ok, mids, big).min(axis=1)
        down = np.where(~ok & (mids < up[:, None]), mids, -1).max(axis=1)
        above[act] = np.minimum(above[act], up)
        below[act] = np.maximum(below[act], down)


def walk_column(
    evaluator: CachedEvaluator,
    design: Design,
    col: Column,
    factor: float,
    baseline: bool,
) -> tuple[int, int, dict[Point, Decision], dict[PointKey, Decision]]:
    """Bounds (low, up) on the DES threshold of one column (a baseline: of its line): top-level,
    picklable.

    When the column's cap lies below hi − 1 (the points above it cannot beat the best so far), the
    cap is probed. Passing there, the threshold is searched below it (exact): galloping from the
    screen's guess, or bisecting where the guess lay above the cap — the screen expected a failure
    there, so its error in this column is unknown, and a gallop would cost about twice the log2
    of it (at 3,000 req/s: 13 runs from the screen's 117 to the DES's 58; 7 bisecting). Failing
    there, t*(p) > cap and the column cannot hold the optimum. Where no column left of it is known to
    pass (hi is the sentinel t_hi + 1: `probe_top`), the top of the range is probed too — first,
    when the screen's guess is above the cap: failing there, t*(p) = hi exactly, so no column left
    of it passes either (a prompt pool too small for any token count closes the whole region below
    it at once); passing, t*(p) lies in (cap, hi − 1]. Elsewhere the top would only tighten an
    upper bound nobody needs, and is left.
    """
    seen: dict[Point, Decision] = {}
    p, lo, hi, guess, cap, _top = col

    def probe(x: int) -> bool:
        pt = (x, 0) if baseline else (p, x)
        d = evaluator.decide(design, pt[0], pt[1], factor)
        seen[pt] = d
        return d.meets

    if baseline or cap >= hi - 1 or cap <= lo:
        found = threshold(lo, hi, guess, probe)
        return found, found, seen, evaluator.fresh
    if col.probe_top and guess > cap:
        # the screen expects a failure at the cap: the top first, which may close the column
        if not probe(hi - 1):
            return hi, hi, seen, evaluator.fresh
        if not probe(cap):
            return cap + 1, hi - 1, seen, evaluator.fresh
    elif not probe(cap):
        if not col.probe_top:
            return cap + 1, hi, seen, evaluator.fresh
        if probe(hi - 1):
            return cap + 1, hi - 1, seen, evaluator.fresh
        return hi, hi, seen, evaluator.fresh
    # passing at the cap where the screen expected a failure (its guess above the cap), the screen
    # is wrong here by an amount nothing bounds: bisect rather than gallop from the cap
    found = threshold(lo, cap, min(guess, cap - 1), probe, bisect=guess > cap)
    return found, found, seen, evaluator.fresh


@dataclass(slots=True)
class KeyOf:
    """The one tie-break's key (search.objective.rank_key) over arrays of points, with the budget."""

    problem: SearchProblem
    design: Design

    def arrays(self, p: IntArray, t: IntArray) -> tuple[list[np.ndarray], BoolArray]:
        cost = np.asarray(self.design.cost_usd_per_h(p, t), dtype=np.float64)
        power = np.asarray(self.design.power_kw(p, t), dtype=np.float64)
        ok = self.problem.within_budget_many(cost, power)
        obj: Objective = self.problem.objective
        s = obj.score(cost, power, np.zeros(len(p)))
        keys = [np.round(s, 9), np.round(cost, 9), np.round(power, 9), (p + t).astype(np.int64), p]
        return keys, ok

    def beats(self, p: IntArray, t: IntArray, best: Key | None) -> BoolArray:
        """Per point: within budget and strictly better than `best` (every point when None)."""
        keys, ok = self.arrays(np.asarray(p, dtype=np.int64), np.asarray(t, dtype=np.int64))
        if best is None:
            return ok
        less = np.zeros(len(ok), dtype=bool)
        eq = np.ones(len(ok), dtype=bool)
        for k, b in zip(keys, best, strict=True):
            less |= eq & (k < b)
            eq &= k == b
        return ok & less

    def key(self, p: int, t: int) -> Key | None:
        keys, ok = self.arrays(np.array([p], dtype=np.int64), np.array([t], dtype=np.int64))
        if not ok[0]:
            return None
        return (float(keys[0][0]), float(keys[1][0]), float(keys[2][0]), int(keys[3][0]), int(keys[4][0]))


@dataclass(slots=True)
class FrontierState:
    """One design space's frontier search in progress (see the module doc)."""

    space: DesignSpace
    design: Design
    keys: KeyOf
    guess: IntArray  # per column (index p − p_lo): the screen's t*(p); a baseline: one entry
    low: dict[int, int] = field(default_factory=dict)  # searched columns: t*(p) ≥ low[p]
    up: dict[int, int] = field(default_factory=dict)  # ... and ≤ up[p] (t_hi + 1: none passes)
    decided: dict[Point, Decision] = field(default_factory=dict)

    @property
    def baseline(self) -> bool:
        return self.space.baseline

    @property
    def p_range(self) -> tuple[int, int]:
        return self.space.prompt_range

    @property
    def t_range(self) -> tuple[int, int]:
        return self.space.token_range

    def best(self) -> tuple[Point | None, Key | None]:
        """The best DES-feasible in-budget point so far (the one tie-break)."""
        best_pt: Point | None = None
        best_key: Key | None = None
        for pt, d in self.decided.items():
            if not d.meets:
                continue
            k = self.keys.key(*pt)
            if k is not None and (best_key is None or k < best_key):
                best_pt, best_key = pt, k
        return best_pt, best_key

    def guess_at(self, p: int) -> int:
        return int(self.guess[0 if self.baseline else p - self.p_range[0]])

    @property
    def tstar(self) -> dict[int, int]:
        """The columns whose DES threshold t*(p) is known exactly."""
        return {p: lo for p, lo in self.low.items() if self.up[p] == lo}

    def seeds(self) -> list[Column]:
        """Round 0: the widest column and the screen's best column (a baseline: its one line)."""
        if self.baseline:
            lo, hi = self.p_range
            return [Column(0, lo - 1, hi + 1, self.guess_at(0), hi)]
        (p_lo, p_hi), (t_lo, t_hi) = self.p_range, self.t_range
        cols = {p_hi}
        ps = np.arange(p_lo, p_hi + 1, dtype=np.int64)
        inside = self.guess <= t_hi
        if inside.any():
            keys, ok = self.keys.arrays(ps[inside], self.guess[inside])
            ok_idx = np.nonzero(ok)[0]
            if len(ok_idx):
                order = np.lexsort(tuple(k[ok_idx] for k in reversed(keys)))
                cols.add(int(ps[inside][ok_idx[order[0]]]))
        else:
            cols.add((p_lo + p_hi) // 2)
        return [self._column(p, t_lo - 1, t_hi + 1, None) for p in sorted(cols)]

    def _column(self, p: int, lo: int, hi: int, best: Key | None) -> Column:
        """Column `p`'s threshold task in (lo, hi), with the last count that can beat `best`."""
        guess = int(min(max(self.corrected_guess(p), lo + 1), hi - 1)) if hi - lo > 1 else lo + 1
        top = hi == self.t_range[1] + 1
        return Column(p, lo, hi, guess, self.cap(p, lo + 1, hi - 1, best), top)

    def cap(self, p: int, lo: int, hi: int, best: Key | None) -> int:
        """The largest t in [lo, hi] whose point (p, t) is within budget and beats `best` (lo − 1
        when none): above it a column cannot hold the optimum, whatever its DES threshold. Cost,
        power and machines all grow with t, so the points that beat `best` are a prefix of the
        column."""
        if hi < lo:
            return lo - 1
        ts = np.arange(lo, hi + 1, dtype=np.int64)
        ok = self.keys.beats(np.full(len(ts), p, dtype=np.int64), ts, best)
        n_ok = int(np.argmin(ok)) if not ok.all() else len(ts)
        return lo + n_ok - 1

    def record(self, p: int, low: int, up: int) -> None:
        """What a column's DES search showed: t*(p) lies in [low, up] (exact when equal)."""
        self.low[p] = low
        self.up[p] = up

    def bounds(self) -> tuple[IntArray, IntArray]:
        """Per column (index p − p_lo): the least and the most t*(p) can be by what the searched
        columns showed — t*(p) ≥ t*(c) for every c > p and ≤ t*(c) for every c < p (monotonicity).
        Where the DES is not monotone the bounds may cross; such a column is left to the guard."""
        (p_lo, p_hi), (t_lo, t_hi) = self.p_range, self.t_range
        n = p_hi - p_lo + 1
        low = np.full(n + 1, t_lo, dtype=np.int64)  # [i]: the floor from columns ≥ p_lo + i
        up = np.full(n + 1, t_hi + 1, dtype=np.int64)  # [i + 1]: the ceiling from columns ≤ p_lo + i
        for p, v in self.low.items():
            low[p - p_lo] = max(low[p - p_lo], v)
        for p, v in self.up.items():
            up[p - p_lo + 1] = min(up[p - p_lo + 1], v)
        floor = np.maximum.accumulate(low[::-1])[::-1][1:]  # from columns > p
        ceil = np.minimum.accumulate(up)[:-1]  # from columns < p
        return floor, ceil

    def corrected_guess(self, p: int) -> int:
        """The screen's t*(p) shifted by its error at the nearest found columns (interpolated): where
        the DES threshold search starts. Only the DES work depends on it, never the answer."""
        t_hi = self.t_range[1]
        g = self.guess_at(p)
        known = sorted(
            (q, t - self.guess_at(q)) for q, t in self.tstar.items() if t <= t_hi and self.guess_at(q) <= t_hi
        )
        if g > t_hi or not known:
            return g
        left = [k for k in known if k[0] < p]
        right = [k for k in known if k[0] > p]
        if left and right:
            (qa, oa), (qb, ob) = left[-1], right[0]
            off = oa + (ob - oa) * (p - qa) / (qb - qa)
        else:
            off = (left[-1] if left else right[0])[1]
        return round(g + off)

    def next_columns(self) -> list[Column]:
        """The middle open column between every two neighbouring searched columns (module doc)."""
        if self.baseline:
            return []
        _pt, best = self.best()
        p_lo, p_hi = self.p_range
        floor, ceil = self.bounds()
        ps = np.arange(p_lo, p_hi + 1, dtype=np.int64)
        open_ = (floor < ceil) & self.keys.beats(ps, floor, best)
        for p in self.low:
            open_[p - p_lo] = False
        out = []
        walked = [p_lo - 1, *sorted(self.low), p_hi + 1]
        for a, b in itertools.pairwise(walked):
            piece = open_[a + 1 - p_lo : b - p_lo]
            if not piece.any():
                continue
            cand = ps[a + 1 - p_lo : b - p_lo][piece]
            mid = int(cand[np.searchsorted(cand, (int(cand[0]) + int(cand[-1])) // 2)])
            i = mid - p_lo
            out.append(self._column(mid, int(floor[i]) - 1, int(ceil[i]), best))
        return out

    def lower_bounds(self) -> IntArray:
        """Per column: 1 + the highest DES-infeasible t at any p' ≥ p (t_lo when none)."""
        (p_lo, p_hi), (t_lo, _t_hi) = self.p_range, self.t_range
        col = np.full(p_hi - p_lo + 1, t_lo - 1, dtype=np.int64)
        for (p, t), d in self.decided.items():
            if not d.meets and p_lo <= p <= p_hi:
                col[p - p_lo] = max(col[p - p_lo], t)
        return np.maximum.accumulate(col[::-1])[::-1] + 1

    def guard_candidates(
        self, screen: Callable[[IntArray, IntArray], np.ndarray], band: float
    ) -> list[Point]:
        """Points the guard re-checks with the DES: cheaper than the optimum, not DES-decided, within
        `guard_depth` of the DES frontier, and with an analytic margin above −band or dominated only
        by near misses. Call `unsettled_cliffs` first: with one left, a stopped failure is taken
        for no cliff, which may leave out a point the rule would take."""
        ps, ts, margin = self._guard_pool(screen)
        doubtful = (margin >= -band) | self._near_miss_only(ps, ts, self._witnesses())[0]
        return [(int(a), int(b)) for a, b in zip(ps[doubtful], ts[doubtful], strict=True)]

    def unsettled_cliffs(
        self, screen: Callable[[IntArray, IntArray], np.ndarray], band: float
    ) -> dict[Point, float]:
        """Stopped failures whose cliff the guard must tell, each with the stop bound that tells it.

        A run stopped below −WITNESS_MARGIN is known to fail by more than a near miss, but beside a
        pass of margin m it is a cliff only if it failed by more than CLIFF_JUMP under m, which its
        bound may not show (`cliffs`: open). Only where taking it for a cliff or not changes the guard's
        candidates is it simulated again, to the bound m − CLIFF_JUMP: stopping there it is a
        cliff, running to the end its margin decides — so the candidates are those of runs to the
        end, and the re-runs are few."""
        ps, ts, margin = self._guard_pool(screen)
        quiet = margin < -band
        ps, ts = ps[quiet], ts[quiet]
        w = self._witnesses()
        as_none, as_cliffs = self._near_miss_only(ps, ts, w)
        differ = as_cliffs & ~as_none
        if not differ.any():
            return {}
        bp, bt, _bm, _certain, open_, bound = w
        out: dict[Point, float] = {}
        for p, t in zip(ps[differ].tolist(), ts[differ].tolist(), strict=True):
            for i in np.nonzero(open_ & (bp >= p) & (bt >= t))[0]:
                out[(int(bp[i]), int(bt[i]))] = float(bound[i])
        return out

    def _guard_pool(self, screen: Callable[[IntArray, IntArray], np.ndarray]):
        """The points the guard may re-check (cheaper than the optimum, not DES-decided, within
        `guard_depth` of the DES frontier) and their analytic margins (NaN read as +inf)."""
        empty = np.zeros(0, dtype=np.int64)
        _pt, best = self.best()
        if best is None:
            return empty, empty, np.zeros(0)
        if self.baseline:
            lo, hi = self.p_range
            bad = [n for (n, _t), d in self.decided.items() if not d.meets]
            top = max([n for n in bad if n <= hi] + [lo - 1]) + 1  # the lowest N not shown infeasible
            ns = np.arange(max(lo, top - int(guard_depth(top))), top, dtype=np.int64)
            ps, ts = ns, np.zeros_like(ns)
        else:
            (p_lo, p_hi), (t_lo, t_hi) = self.p_range, self.t_range
            low = self.lower_bounds()
            cols = np.arange(p_lo, p_hi + 1, dtype=np.int64)
            depth = guard_depth(low)
            start = np.maximum(t_lo, low - depth)
            # only columns whose first point in the window beats the optimum can hold candidates
            live = (low > t_lo) & self.keys.beats(cols, np.minimum(start, t_hi), best)
            pp, tt = [], []
            for i in np.nonzero(live)[0]:
                t = np.arange(start[i], low[i], dtype=np.int64)
                pp.append(np.full(len(t), cols[i]))
                tt.append(t)
            if not pp:
                return empty, empty, np.zeros(0)
            ps, ts = np.concatenate(pp), np.concatenate(tt)
        keep = self.keys.beats(ps, ts, best)
        keep &= np.array(
            [(int(a), int(b)) not in self.decided for a, b in zip(ps, ts, strict=True)], dtype=bool
        )
        ps, ts = ps[keep], ts[keep]
        if not len(ps):
            return empty, empty, np.zeros(0)
        margin = np.nan_to_num(np.asarray(screen(ps, ts), dtype=np.float64), nan=math.inf)
        return ps, ts, margin

    def _near_miss_only(self, ps: IntArray, ts: IntArray, w: _Witnesses) -> tuple[BoolArray, BoolArray]:
        """search.grid.near_miss_only over the points given, with cliffs as weak witnesses too: every
        DES-infeasible point dominating it failed by less than WITNESS_MARGIN or is a cliff
        (`cliffs`), and one of them is at most WITNESS_REACH machines away — with the stopped
        failures whose cliff their bound does not tell taken for no cliff, and for cliffs."""
        bp, bt, bm, certain, open_, _bound = w
        out = np.zeros((2, len(ps)), dtype=bool)
        if not len(bp) or not len(ps):
            return out[0], out[1]
        weak = (bm > -WITNESS_MARGIN) | certain
        for i, (p, t) in enumerate(zip(ps, ts, strict=True)):
            dom = (bp >= p) & (bt >= t)
            if not dom.any():
                continue
            close = bool((dom & ((bp - p) + (bt - t) <= WITNESS_REACH)).any())
            out[0, i] = close and bool(weak[dom].all())
            out[1, i] = close and bool((weak | open_)[dom].all())
        return out[0], out[1]

    def _witnesses(self) -> _Witnesses:
        """The DES-infeasible points so far and their cliffs (`cliffs`), for the guard's rules."""
        bp, bt, bm = self._failures()
        return (bp, bt, bm, *self.cliffs(bp, bt, bm))

    def _failures(self) -> tuple[IntArray, IntArray, npt.NDArray[np.float64]]:
        """The DES-infeasible points so far: prompt counts, token counts, margins."""
        bad = [(p, t, d.margin) for (p, t), d in self.decided.items() if not d.meets]
        bp = np.array([b[0] for b in bad], dtype=np.int64)
        bt = np.array([b[1] for b in bad], dtype=np.int64)
        return bp, bt, np.array([b[2] for b in bad], dtype=np.float64)

    def cliffs(
        self, bp: IntArray, bt: IntArray, bm: npt.NDArray[np.float64]
    ) -> tuple[BoolArray, BoolArray, npt.NDArray[np.float64]]:
        """Per DES-infeasible point: whether it is a cliff — one machine more in either pool passes,
        with a margin more than CLIFF_JUMP above its own. A monotone DES moves its margin a few
        hundredths per machine near the frontier; a jump this large is where the DES flips
        (Splitwise-HH at 700 req/s fails at 81P+10T by −0.66 between passes at 9 and 11 token
        machines), so such a failure is weak evidence for the points just below it.

        Returns (a cliff for certain; open: a run stopped early beside a pass, whose bound does not
        tell; for an open one, the stop bound that would tell it — the highest neighbouring pass's
        margin less CLIFF_JUMP, which lies under the bound it stopped at)."""
        certain = np.zeros(len(bp), dtype=bool)
        open_ = np.zeros(len(bp), dtype=bool)
        bound = np.full(len(bp), -math.inf)
        for i, (p, t, m) in enumerate(zip(bp.tolist(), bt.tolist(), bm.tolist(), strict=True)):
            stopped = not self.decided[(p, t)].complete
            ups = [(p + 1, t)] if self.baseline else [(p, t + 1), (p + 1, t)]
            for q in ups:
                d = self.decided.get(q)
                if d is None or not d.meets:
                    continue
                if d.margin - (m if math.isfinite(m) else -1.0) > CLIFF_JUMP:
                    certain[i] = True
                elif stopped:
                    open_[i] = True
                    # a nano-headroom lower, so that a run stopped there (margin just under
                    # the bound) reads as more than CLIFF_JUMP under the pass in floating point
                    tell = d.margin - CLIFF_JUMP - _CLIFF_BOUND_SLACK
                    bound[i] = max(bound[i], tell)
        open_ &= ~certain
        return certain, open_, bound


__all__ = [
    "FULL_GRID_MAX_MACHINES",
    "STOP_BELOW_HEADROOM",
    "Column",
    "FrontierState",
    "KeyOf",
    "guard_depth",
    "screen_first_passing",
    "use_frontier",
    "walk_column",
]
