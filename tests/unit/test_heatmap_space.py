"""The heatmap's one-design search space is the design itself, instances included (TP, weight and
KV precision per pool), so `heatmap --token-tp/--token-precision` maps the design it was given."""

from __future__ import annotations

import numpy as np
import pytest

from splitplan.api._heatmap import _space
from splitplan.design import PAPER_DESIGNS, custom_design, get_design


@pytest.mark.parametrize("name", [n for n in PAPER_DESIGNS if not get_design(n).is_baseline])
def test_a_paper_design_s_space_is_that_design(name: str) -> None:
    d = get_design(name)
    assert _space(d, (1, 3), (1, 3)).design() == d


@pytest.mark.parametrize(
    "instances",
    [
        {"token_tp": 2},
        {"prompt_tp": 4, "token_precision": "fp8"},
        {"prompt_kv_precision": "fp8"},
        {"token_tp": 4, "token_precision": "fp8", "token_kv_precision": "fp16"},
    ],
)
def test_an_instance_design_s_space_keeps_its_instances(instances: dict[str, object]) -> None:
    d = custom_design("dgx-h100", "dgx-h100", **instances)  # type: ignore[arg-type]
    space = _space(d, (1, 3), (1, 3))
    assert space.design() == d
    assert (space.prompt.tps, space.token.tps) == ((d.prompt.tp,), (d.token.tp,))


def test_a_heatmap_evaluates_its_grid_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its cost and power searches read the heatmap's own analytic evaluation of the grid
    (run_search's `screens`) rather than screening the same grid twice more."""
    from splitplan import api
    from splitplan.catalog import get_model
    from splitplan.sim import analytic
    from splitplan.sim.scenario import Scenario
    from splitplan.workload import make_workload

    calls: list[int] = []
    evaluate = analytic.evaluate_grid

    def counted(*args: object, **kwargs: object) -> analytic.AnalyticBatch:
        calls.append(1)
        return evaluate(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(analytic, "evaluate_grid", counted)
    wl = make_workload("conversation", rate_rps=20, duration_s=30, seed=0)
    sc = Scenario(workload=wl, model=get_model("llama2-70b"))
    h = api.heatmap(get_design("splitwise-hh"), sc, (1, 6), (1, 6), "analytic")
    assert len(calls) == 1
    assert h.cost_optimal is not None
    assert h.power_optimal is not None


def test_a_search_refuses_a_screen_of_another_grid() -> None:
    from splitplan.search.context import SearchContext
    from splitplan.search.evaluate import Screen
    from splitplan.search.parallel import Runner
    from splitplan.search.problem import SearchProblem
    from splitplan.search.store import PointStore

    space = _space(get_design("splitwise-hh"), (1, 3), (1, 4))
    ctx = SearchContext(
        problem=SearchProblem(spaces=(space,), rate_rps=10.0),
        evaluator=None,  # type: ignore[arg-type]
        runner=Runner(),
        store=PointStore(),
        progress=None,
    )
    with pytest.raises(ValueError, match="a screen of 9 points"):
        ctx.seed_screen(space, Screen(margin=np.zeros(9), slowdown={}))
    ctx.seed_screen(space, Screen(margin=np.zeros(12), slowdown={}))
    assert len(ctx.screens) == 1


def test_a_search_refuses_screens_of_spaces_it_does_not_search() -> None:
    from splitplan.search import run_search
    from splitplan.search.evaluate import Screen
    from splitplan.search.problem import SearchProblem

    space = _space(get_design("splitwise-hh"), (1, 2), (1, 2))
    problem = SearchProblem(spaces=(space,), rate_rps=10.0)
    with pytest.raises(ValueError, match="screens of spaces the problem does not search: other"):
        run_search(problem, None, screens={"other": Screen(margin=np.zeros(4), slowdown={})})  # type: ignore[arg-type]


def test_the_optima_of_an_instance_design_are_on_the_grids_own_axes() -> None:
    """The grid counts instances; a TP-4 prompt pool's two instances fill one node. The optima
    are points of the grid (they had been its node counts: a point the grid shows infeasible)."""
    from splitplan import api
    from splitplan.catalog import get_model
    from splitplan.sim.scenario import Scenario
    from splitplan.workload import make_workload

    d = custom_design("dgx-h100", "dgx-h100", prompt_tp=4, token_tp=2)
    sc = Scenario(
        workload=make_workload("coding", rate_rps=30, duration_s=20, seed=0), model=get_model("llama3.1-8b")
    )
    h = api.heatmap(d, sc, (1, 8), (1, 6), "analytic")
    for point in (h.cost_optimal, h.power_optimal):
        assert point is not None
        at = (h.prompt_machines == point.prompt_machines) & (h.token_machines == point.token_machines)
        assert at.sum() == 1
        assert bool(h.meets_slo[at][0])
        assert float(h.cost_usd_per_h[at][0]) == pytest.approx(point.cost_usd_per_h)
    feasible = h.meets_slo
    assert h.cost_optimal.cost_usd_per_h == pytest.approx(float(h.cost_usd_per_h[feasible].min()))
