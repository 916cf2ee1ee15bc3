"""The frontier search of large grids, ranges that follow the load, and infeasibility explained.

Closed-form evaluators (search_fakes) make the exhaustive optimum cheap to compute, so the frontier
search is compared with brute force on grids far larger than the whole-grid hybrid would take.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pytest
from search_fakes import FakeEvaluator

from splitplan.search import SearchProblem, paper_space, run_search
from splitplan.search.context import SearchContext
from splitplan.search.frontier import use_frontier
from splitplan.search.parallel import Runner
from splitplan.search.ranges import capacity_estimate
from splitplan.search.store import PointStore


def exhaustive_optimum(ev, design, p_range, t_range, objective="cost"):
    """Brute force over the exact function, vectorized (search_fakes.exhaustive_optimum's key)."""
    p = np.arange(p_range[0], p_range[1] + 1)
    t = np.array([0]) if design.is_baseline else np.arange(t_range[0], t_range[1] + 1)
    pp, tt = (a.ravel() for a in np.meshgrid(p, t, indexing="ij"))
    ok = np.round(ev.true_margin(design, pp, tt, 1.0), 12) >= 0
    cost = pp * design.prompt.cost_usd_per_h + tt * design.token.cost_usd_per_h
    power = pp * design.prompt.power_kw + tt * design.token.power_kw
    value = np.round(power if objective == "power" else cost, 9)
    keys = sorted(
        zip(value[ok].tolist(), (pp + tt)[ok].tolist(), pp[ok].tolist(), tt[ok].tolist(), strict=True)
    )
    return tuple(keys[0]) if keys else None


def _key(r, objective="cost") -> tuple:
    value = r.power_kw if objective == "power" else r.cost_usd_per_h
    p = r.machines if r.baseline else r.prompt_machines
    t = 0 if r.baseline else r.token_machines
    return (round(value, 9), p + t, p, t)


@pytest.mark.parametrize("design", ["splitwise-hh", "splitwise-aa", "splitwise-ha", "baseline-h100"])
@pytest.mark.parametrize("objective", ["cost", "power"])
@pytest.mark.parametrize("bias", [0.0, 0.3, -0.25])
def test_frontier_equals_brute_force_on_a_large_grid(design: str, objective: str, bias: float) -> None:
    ev = FakeEvaluator(prompt_need=26.5 * 12, token_need=2.5 * 12, bias=bias, noise=0.02)
    space = paper_space(design, prompt_range=(1, 400), token_range=None if "baseline" in design else (1, 400))
    pb = SearchProblem(spaces=(space,), objective=objective)
    assert use_frontier(pb, space)
    r = run_search(pb, ev).results[0]
    assert r.meets_slo
    assert r.verified_by == "des"
    assert _key(r, objective) == exhaustive_optimum(
        ev, space.design(), space.prompt_range, space.token_range, objective
    )
    points = 400 if space.baseline else 400 * 400
    assert len(ev.calls) < max(40, 0.002 * points)  # a few DES runs, not one per column


def test_frontier_and_whole_grid_agree_on_the_default_grid() -> None:
    ev = FakeEvaluator(bias=0.2, noise=0.05)
    space = paper_space("splitwise-ha")
    whole = run_search(SearchProblem(spaces=(space,), frontier=False), ev).results[0]
    ev2 = FakeEvaluator(bias=0.2, noise=0.05)
    front = run_search(SearchProblem(spaces=(space,), frontier=True), ev2).results[0]
    assert _key(front) == _key(whole)
    assert len(ev2.calls) <= len(ev.calls)


def test_budget_excludes_points_in_the_frontier_search() -> None:
    ev = FakeEvaluator(prompt_need=26.5 * 8, token_need=2.5 * 8)
    space = paper_space("splitwise-hh", prompt_range=(1, 300), token_range=(1, 300))
    free = run_search(SearchProblem(spaces=(space,)), ev).results[0]
    capped = run_search(SearchProblem(spaces=(space,), cost_budget_usd_per_h=free.cost_usd_per_h - 1), ev)
    r = capped.results[0]
    assert not r.meets_slo
    assert r.limited_by == "budget"


def test_max_machines_raises_and_lowers_the_ranges() -> None:
    up = paper_space("splitwise-hh", max_machines=200)
    assert (up.prompt_range, up.token_range, up.auto_range) == ((1, 200), (1, 200), False)
    down = paper_space("splitwise-hh", max_machines=5)
    assert (down.prompt_range, down.token_range) == ((1, 5), (1, 5))
    assert paper_space("baseline-h100", max_machines=300).prompt_range == (1, 300)
    assert paper_space("splitwise-hh").auto_range
    assert not paper_space("splitwise-hh", prompt_range=(1, 39)).auto_range


@pytest.mark.parametrize("design", ["splitwise-hh", "baseline-a100"])
def test_automatic_ranges_follow_the_load(design: str) -> None:
    # ten times the paper's load: the default 1–39 / 1–80 cannot hold the answer
    ev = FakeEvaluator(prompt_need=26.5 * 10, token_need=2.5 * 10)
    auto = run_search(SearchProblem(spaces=(paper_space(design),)), ev).results[0]
    assert auto.meets_slo
    assert auto.limited_by is None
    big = paper_space(design, prompt_range=(1, 1000), token_range=None if "baseline" in design else (1, 1000))
    assert _key(auto) == exhaustive_optimum(ev, big.design(), big.prompt_range, big.token_range)


def test_an_optimistic_estimate_is_corrected_by_widening() -> None:
    # the screen passes at well under half the true need: the first range is too small, the
    # search widens it until the DES finds the answer, and the answer is the brute-force one
    ev = FakeEvaluator(prompt_need=26.5 * 10, token_need=2.5 * 10, offset=0.9)
    r = run_search(SearchProblem(spaces=(paper_space("splitwise-hh"),)), ev).results[0]
    assert r.meets_slo
    big = paper_space("splitwise-hh", prompt_range=(1, 1000), token_range=(1, 1000))
    assert _key(r) == exhaustive_optimum(ev, big.design(), big.prompt_range, big.token_range)


@pytest.mark.parametrize("frontier", [False, True])
def test_infeasible_design_names_closest_configuration_and_binding_slo(frontier: bool) -> None:
    ev = FakeEvaluator(prompt_need=26.5 * 10, token_need=2.5 * 10)
    space = paper_space("baseline-a100", max_machines=20)
    r = run_search(SearchProblem(spaces=(space,), frontier=frontier), ev).results[0]
    assert not r.meets_slo
    assert r.limited_by == "range"
    assert r.closest is not None
    assert r.closest["machines"] == 20
    assert r.closest["decided_by"] == "des"
    assert r.shortfall is not None
    assert r.shortfall["slo"] == "ttft_p90"
    assert r.shortfall["margin"] < 0
    assert r.shortfall["over_limit"] > 0
    doc = r.to_json()
    assert doc["limited_by"] == "range"
    assert doc["closest"]["machines"] == 20


@dataclass
class SlowMachines(FakeEvaluator):
    """A latency floor no count lowers: every configuration misses by `floor` at any load (a
    TTFT on a slow link, say), as well as by the capacity margin."""

    floor: float = -0.3

    def true_margin(self, design, p, t, f):
        return np.minimum(super().true_margin(design, p, t, f), self.floor)


@pytest.mark.parametrize("design", ["baseline-a100", "splitwise-hh"])
def test_an_infeasible_design_the_machines_own_latency_holds_back_says_so(design: str) -> None:
    """No count helps: the limit is the machines' latency, not the count range a user would widen
    in vain; a design short of machines stays limited by the range."""
    space = paper_space(design, max_machines=20)
    slow = run_search(SearchProblem(spaces=(space,)), SlowMachines()).results[0]
    assert not slow.meets_slo
    assert slow.limited_by == "latency"
    assert slow.closest is not None
    short = run_search(SearchProblem(spaces=(space,)), FakeEvaluator(prompt_need=26.5 * 10, token_need=25.0))
    assert short.results[0].limited_by == "range"


def test_feasible_optimum_on_the_edge_of_a_given_range_says_so() -> None:
    ev = FakeEvaluator()
    space = paper_space("splitwise-hh", prompt_range=(1, 14), token_range=(1, 39))
    r = run_search(SearchProblem(spaces=(space,)), ev).results[0]
    assert r.meets_slo
    assert r.prompt_machines == 14
    assert r.limited_by == "range"
    inner = run_search(SearchProblem(spaces=(replace(space, prompt_range=(1, 39)),)), ev).results[0]
    assert inner.limited_by is None


@pytest.mark.parametrize("design", ["baseline-h100", "splitwise-hh"])
def test_screen_search_over_many_counts_per_round_equals_bisection(design: str) -> None:
    from splitplan.design import get_design
    from splitplan.search.frontier import screen_first_passing

    d = get_design(design)
    ev = FakeEvaluator(prompt_need=26.5 * 40, token_need=2.5 * 40, bias=0.2)
    fixed = np.arange(1, 600, 7, dtype=np.int64)
    if d.is_baseline:
        fixed = fixed[:1]
    one = screen_first_passing(ev, d, fixed, 1, 3000, baseline=d.is_baseline)
    n_one, ev.screens = ev.screens, 0
    many = screen_first_passing(ev, d, fixed, 1, 3000, baseline=d.is_baseline, ways=32)
    assert many.tolist() == one.tolist()
    assert ev.screens < n_one
    # and the answer is the smallest passing count (hi + 1 where none passes)
    t = np.arange(1, 3001)
    for i, p in enumerate(fixed):
        if d.is_baseline:
            m = ev.screen(d, t, np.zeros_like(t)).margin
        else:
            m = ev.screen(d, np.full(len(t), p), t).margin
        ok = np.nonzero(m >= 0)[0]
        assert one[i] == (int(t[ok[0]]) if len(ok) else 3001)


@pytest.mark.parametrize("offset", [0.3, 0.6])
def test_a_column_too_small_for_any_token_count_costs_two_des_runs(offset: float) -> None:
    # prompt-bound, and a screen optimistic enough to expect such columns to pass: every column
    # below the prompt need fails for any token count. Past the seeds, a column is searched up to
    # its cap (the last count that can beat the best so far) and, failing there, once at the top
    # of its range; failing there too it closes every column left of it — no walk up the column.
    ev = FakeEvaluator(prompt_need=26.5 * 12, token_need=2.5 * 12, offset=offset)
    space = paper_space("splitwise-hh", prompt_range=(1, 400), token_range=(1, 400))
    design = space.design()
    r = run_search(SearchProblem(spaces=(space,)), ev).results[0]
    assert _key(r) == exhaustive_optimum(ev, design, space.prompt_range, space.token_range)
    by_col: dict[int, list[int]] = {}
    for _name, p, t, _f in ev.calls:
        by_col.setdefault(p, []).append(t)
    hopeless = sorted(p for p in by_col if float(ev.true_margin(design, p, 400, 1.0)) < 0)
    walked = [p for p in hopeless if len(by_col[p]) > 2]
    assert len(hopeless) >= 3
    assert len(walked) <= 1  # at most the screen's best column, a seed searched before any best


@pytest.mark.parametrize("notch", [(150, 40), (160, 31), (200, 20)])
def test_the_frontier_search_survives_a_single_non_monotone_point(notch: tuple[int, int]) -> None:
    # one DES-infeasible point inside the feasible region (failing by 1 %: a near miss): the guard
    # re-checks the points it alone declared infeasible, so the answer stays the brute-force one
    ev = FakeEvaluator(prompt_need=26.5 * 8, token_need=2.5 * 8, bias=0.1, notch=notch)
    space = paper_space("splitwise-hh", prompt_range=(1, 300), token_range=(1, 300))
    r = run_search(SearchProblem(spaces=(space,)), ev).results[0]
    p = np.arange(1, 301)
    pp, tt = (a.ravel() for a in np.meshgrid(p, p, indexing="ij"))
    ok = np.round(ev.true_margin(space.design(), pp, tt, 1.0), 12) >= 0
    ok &= ~((pp == notch[0]) & (tt == notch[1]))
    cost = pp * space.design().prompt.cost_usd_per_h + tt * space.design().token.cost_usd_per_h
    keys = sorted(
        zip(
            np.round(cost[ok], 9).tolist(),
            (pp + tt)[ok].tolist(),
            pp[ok].tolist(),
            tt[ok].tolist(),
            strict=True,
        )
    )
    assert _key(r) == tuple(keys[0])


def _state_with(decided: dict[tuple[int, int], float]):
    from splitplan.search.evaluate import Decision
    from splitplan.search.frontier import FrontierState, KeyOf

    space = paper_space("splitwise-hh", prompt_range=(1, 120), token_range=(1, 120))
    design = space.design()
    st = FrontierState(
        space=space,
        design=design,
        keys=KeyOf(SearchProblem(spaces=(space,)), design),
        guess=np.full(120, 121, dtype=np.int64),
    )
    for pt, m in decided.items():
        st.decided[pt] = Decision(meets=m >= 0, margin=m, binding="tbt_p90")
    return st


@pytest.mark.parametrize(
    ("failed", "above", "cliff"), [(-0.66, 0.23, True), (-0.66, -0.2, False), (-0.15, 0.05, False)]
)
def test_a_failure_just_under_a_far_better_pass_is_a_weak_witness(
    failed: float, above: float, cliff: bool
) -> None:
    # Splitwise-HH at 700 req/s: 81P+11T passes (+0.23), 81P+10T fails (−0.66), 81P+9T passes. The
    # failure at 10 is a cliff (a margin jump above CLIFF_JUMP to the pass above it), so the points
    # only it dominates, cheaper than the best, are re-checked however the screen judges them;
    # a failure under another failure, or under a pass close to its own margin, is no cliff.
    st = _state_with({(81, 11): above, (81, 10): failed, (120, 3): 0.01})
    st.record(81, 11 if above >= 0 else 12, 11 if above >= 0 else 121)

    def hopeless(p: np.ndarray, t: np.ndarray) -> np.ndarray:  # the screen's verdict: far off
        return np.full(len(p), -np.inf)

    cands = st.guard_candidates(hopeless, 0.3)
    assert ((81, 9) in cands) is cliff
    assert ((80, 10) in cands) is cliff


@pytest.mark.parametrize(("settled", "cliff"), [(-0.66, True), (-0.3, False), (None, True)])
def test_a_stopped_failure_beside_a_pass_is_settled_where_the_guard_needs_its_cliff(
    settled: float | None, cliff: bool
) -> None:
    # 81P+10T stopped once certain to fail below −0.1 under a pass at 81P+11T (+0.05): a cliff
    # only if its true margin is below 0.05 − CLIFF_JUMP, which the bound does not tell. The points
    # only it dominates depend on it, so it is named with the bound that tells it; simulated again
    # (to the end: −0.66 or −0.3; stopped at that bound: None), the guard reads it as runs to the
    # end would, and nothing is left to settle.
    from splitplan.search.evaluate import Decision
    from splitplan.search.frontier import CLIFF_JUMP, STOP_BELOW_HEADROOM

    st = _state_with({(81, 11): 0.05, (120, 3): 0.01})
    below = float(np.nextafter(STOP_BELOW_HEADROOM, -np.inf))
    st.decided[(81, 10)] = Decision(meets=False, margin=below, binding="tbt_p90", complete=False)
    st.record(81, 11, 11)

    def hopeless(p: np.ndarray, t: np.ndarray) -> np.ndarray:
        return np.full(len(p), -np.inf)

    todo = st.unsettled_cliffs(hopeless, 0.3)
    assert list(todo) == [(81, 10)]
    bound = todo[(81, 10)]
    assert 0.05 - CLIFF_JUMP - 1e-6 < bound < 0.05 - CLIFF_JUMP
    if settled is None:
        under = float(np.nextafter(bound, -np.inf))
        d = Decision(meets=False, margin=under, binding="tbt_p90", complete=False)
    else:
        d = Decision(meets=False, margin=settled, binding="tbt_p90")
    st.decided[(81, 10)] = d
    assert st.unsettled_cliffs(hopeless, 0.3) == {}
    cands = st.guard_candidates(hopeless, 0.3)
    assert ((81, 9) in cands) is cliff
    assert ((80, 10) in cands) is cliff


def test_a_stopped_failure_that_no_candidate_depends_on_is_left_as_is() -> None:
    # the same stopped failure, but the screen already takes every point under it as doubtful:
    # whether it is a cliff changes no candidate, so it is not simulated again
    from splitplan.search.evaluate import Decision
    from splitplan.search.frontier import STOP_BELOW_HEADROOM

    st = _state_with({(81, 11): 0.05, (120, 3): 0.01})
    below = float(np.nextafter(STOP_BELOW_HEADROOM, -np.inf))
    st.decided[(81, 10)] = Decision(meets=False, margin=below, binding="tbt_p90", complete=False)
    st.record(81, 11, 11)

    def close(p: np.ndarray, t: np.ndarray) -> np.ndarray:
        return np.zeros(len(p))

    assert st.unsettled_cliffs(close, 0.3) == {}
    assert (81, 9) in st.guard_candidates(close, 0.3)


class _ColumnProbe:
    """A DES stand-in for one column: passes from `first` token machines up."""

    def __init__(self, first: int) -> None:
        self.first, self.calls, self.fresh = first, [], {}

    def decide(self, design, p, t, factor):
        from splitplan.search.evaluate import Decision

        self.calls.append(t)
        return Decision(meets=t >= self.first, margin=0.1 if t >= self.first else -0.2, binding="x")


@pytest.mark.parametrize(("guess", "bisects"), [(90, True), (21, False)])
def test_a_column_passing_at_its_cap_against_the_screen_is_bisected(guess: int, bisects: bool) -> None:
    from splitplan.search.frontier import Column, walk_column

    ev = _ColumnProbe(first=20)
    low, up, seen, _fresh = walk_column(ev, None, Column(5, 0, 101, guess, 60), 1.0, False)
    assert (low, up) == (20, 20)
    assert ev.calls[0] == 60  # the cap first: it passes, the screen's guess said it would not
    if bisects:
        assert ev.calls[1] == 30
        assert len(ev.calls) <= 1 + 6  # the cap, then log2 of (0, 60]
    else:
        assert ev.calls[1:3] == [21, 20]  # a guess below the cap is trusted: gallop from it
    assert set(seen) == {(5, t) for t in ev.calls}


@pytest.mark.parametrize("load", [0.5, 3.0, 40.0, 400.0])
@pytest.mark.parametrize("design", ["splitwise-hh", "baseline-h100"])
def test_capacity_estimate_is_the_first_passing_diagonal_size_from_few_screened_points(
    design: str, load: float
) -> None:
    ev = FakeEvaluator(prompt_need=26.5 * load, token_need=2.5 * load)
    screened: list[int] = []
    screen = ev.screen

    def counting_screen(d, prompt, token, rate_scale=1.0):
        screened.append(int(np.size(prompt)))
        return screen(d, prompt, token, rate_scale)

    ev.screen = counting_screen  # type: ignore[method-assign]
    space = paper_space(design)
    pb = SearchProblem(spaces=(space,))
    ctx = SearchContext(problem=pb, evaluator=ev, runner=Runner(), store=PointStore(), progress=None)
    est = capacity_estimate(ctx, space)
    n = np.arange(1, 1 << 16)
    ok = ev.true_margin(space.design(), n, np.zeros_like(n) if space.baseline else n, 1.0) >= 0
    assert est == int(n[int(np.argmax(ok))])
    # the range's own grid, the default range's diagonal, then single points: the ladder's rungs up
    # to the first that passes and a bisection of its bracket (not every size of the bracket)
    grid = int(np.prod([hi - lo + 1 for lo, hi in (space.prompt_range, space.token_range) if hi]))
    singles = [k for k in screened if k == 1]
    assert sum(screened) - len(singles) <= grid + 80
    assert len(singles) <= 2 * 16 + 2
