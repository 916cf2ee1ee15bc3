"""A search's progress counts DES runs against a total forecast at the start (closed-form fakes).

The forecast runs the strategies against the screen's verdicts: exact where the DES agrees with
the screen, and otherwise the total grows only by the runs beyond it, one at a time at its end.
"""

from __future__ import annotations

import pytest
from search_fakes import FakeEvaluator

from splitplan.search import PointStore, SearchProblem, paper_space, run_search
from splitplan.search.parallel import Runner

DESIGNS = ("baseline-h100", "splitwise-aa", "splitwise-hh", "splitwise-ha")


class Recorder:
    """Every `add` and the done count; `done` may never pass what was scheduled."""

    def __init__(self) -> None:
        self.adds: list[int] = []
        self.done = 0
        self.withdrawn = False

    @property
    def total(self) -> int:
        return sum(self.adds)

    def add(self, n: int) -> None:
        assert not self.withdrawn  # a withdrawal ends the search's accounting
        if n < 0:  # forecast runs that were not needed, withdrawn at the end
            self.withdrawn = True
            assert self.done < self.total
            assert self.done == self.total + n
        elif self.adds:  # after the forecast, the total grows only when the runs have reached it
            assert n == 1
            assert self.done == self.total
        self.adds.append(n)

    def advance(self, n: int = 1) -> None:
        self.done += n
        assert self.done <= self.total


def _problem(engine: str = "hybrid", objective: str = "cost") -> SearchProblem:
    return SearchProblem(spaces=tuple(paper_space(d) for d in DESIGNS), engine=engine, objective=objective)


CASES = [("hybrid", "cost"), ("des", "cost"), ("hybrid", "power"), ("hybrid", "throughput")]


@pytest.mark.parametrize(("engine", "objective"), CASES)
def test_the_forecast_is_exact_where_the_des_agrees_with_the_screen(engine, objective):
    rec = Recorder()
    out = run_search(_problem(engine, objective), FakeEvaluator(), progress=rec)
    assert out.des_evaluations > 0
    assert rec.adds == [out.des_evaluations]  # one total, given at the start, never moved
    assert rec.done == out.des_evaluations


SCREENS = {  # an optimistic screen (the DES needs more runs) and a pessimistic one (fewer)
    "optimistic": {"bias": 0.5, "noise": 0.05, "offset": -0.02},
    "pessimistic": {"bias": -0.3, "noise": 0.1},
}


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("screen", sorted(SCREENS))
def test_a_disagreeing_screen_moves_the_total_only_past_the_forecast(jobs, screen):
    rec = Recorder()
    out = run_search(_problem(), FakeEvaluator(**SCREENS[screen]), runner=Runner(jobs=jobs), progress=rec)
    assert rec.done == rec.total == out.des_evaluations
    assert rec.adds[0] > 0
    assert (len(rec.adds) > 1 and rec.adds[-1] == 1) if screen == "optimistic" else rec.withdrawn
    plain = run_search(_problem(), FakeEvaluator(**SCREENS[screen]))
    # progress only watches: the same answer from the same runs
    assert [r.to_json() for r in out.results] == [r.to_json() for r in plain.results]
    assert out.des_evaluations == plain.des_evaluations


def test_a_resumed_search_forecasts_only_what_is_left():
    store = PointStore()
    first = run_search(_problem(), FakeEvaluator(), store=store)
    rec = Recorder()
    again = run_search(_problem(), FakeEvaluator(), store=store, progress=rec)
    assert first.des_evaluations > 0
    assert again.des_evaluations == 0
    assert rec.adds == [0]
    assert rec.done == 0


def test_the_analytic_engine_forecasts_nothing():
    rec = Recorder()
    out = run_search(_problem("analytic"), FakeEvaluator(), progress=rec)
    assert out.des_evaluations == 0
    assert rec.adds == []


def test_the_real_run_replays_the_forecasts_screens_and_workers_get_none():
    import pickle

    import numpy as np

    from splitplan.design import get_design
    from splitplan.search.evaluate import ScreenVerdicts

    ev = FakeEvaluator()
    stand_in = ScreenVerdicts(ev)
    d = get_design("splitwise-hh")
    p, t = np.arange(1, 6), np.arange(1, 6)
    first = stand_in.screen(d, p, t, 1.0)
    replay = stand_in.replayed()
    screens_before = ev.screens
    assert replay.screen(d, p.copy(), t.copy(), 1.0) is first  # same call by value: no new screen
    assert ev.screens == screens_before
    replay.screen(d, p, t, 2.0)  # another rate is screened afresh
    assert ev.screens == screens_before + 1
    shipped = pickle.loads(pickle.dumps(replay))
    assert shipped.screens == {}
