"""The configuration cell of the search table: instance counts with their TP wherever an instance
is less than a whole node, node counts otherwise."""

from __future__ import annotations

from dataclasses import replace

import pytest

from splitplan.report.render import _config_cell
from splitplan.search.result import DesignResult


def _result(baseline: bool, **counts) -> DesignResult:
    return DesignResult(
        design="custom-baseline" if baseline else "custom",
        baseline=baseline,
        prompt_gpu="hgx-h200",
        token_gpu="hgx-h200",
        prompt_power_cap=1.0,
        token_power_cap=1.0,
        meets_slo=True,
        **counts,
    )


def _split(p_inst, t_inst, p_nodes, t_nodes, p_tp, t_tp) -> DesignResult:
    return _result(
        False,
        prompt_machines=p_nodes,
        token_machines=t_nodes,
        prompt_instances=p_inst,
        token_instances=t_inst,
        prompt_tp=p_tp,
        token_tp=t_tp,
    )


@pytest.mark.parametrize(
    ("result", "cell"),
    [
        (_split(9, 3, 9, 3, None, None), "9P+3T"),  # whole nodes: the paper's notation
        (_split(9, 3, 9, 3, 8, 8), "9P+3T"),
        (_split(6, 4, 3, 1, 4, 2), "6P×tp4+4T×tp2"),
        # one TP4 and one TP2 instance fill one node each but are billed a node's share
        (_split(1, 1, 1, 1, 4, 2), "1P×tp4+1T×tp2"),
        (_split(2, 1, 2, 1, 8, 4), "2P+1T×tp4"),
    ],
)
def test_split_cells_count_instances_below_a_node(result: DesignResult, cell: str) -> None:
    assert _config_cell(result) == cell


@pytest.mark.parametrize(
    ("instances", "machines", "tp", "cell"),
    [(54, 54, None, "N=54"), (8, 4, 4, "N=8×tp4"), (1, 1, 2, "N=1×tp2"), (3, 3, 8, "N=3")],
)
def test_baseline_cells_count_instances_below_a_node(instances, machines, tp, cell) -> None:
    r = _result(True, machines=machines, instances=instances, prompt_tp=tp)
    assert _config_cell(r) == cell


def test_with_no_design_feasible_the_summary_still_says_where_each_came_closest():
    from splitplan.report.render import search_summary
    from splitplan.search.objective import Engine, Objective
    from splitplan.search.result import SearchOutcome

    r = replace(
        _result(False, prompt_instances=3, token_instances=2, prompt_tp=2, token_tp=2),
        meets_slo=False,
        closest={"prompt_machines": 1, "token_machines": 1, "machines": 2, "decided_by": "des"}
        | {"prompt_instances": 3, "token_instances": 2, "prompt_tp": 2, "token_tp": 2},
        shortfall={"slo": "ttft_p90", "margin": -0.5, "over_limit": 1.0, "unstable": False},
        limited_by="range",
    )
    text = search_summary(
        SearchOutcome(
            objective=Objective.COST,
            results=(r,),
            points=[],
            des_evaluations=1,
            wall_s=0.1,
            engine=Engine.HYBRID,
        )
    )
    assert "No design meets all nine SLOs" in text
    assert (
        "No configuration of custom meets all nine SLOs: closest 3P×tp2+2T×tp2 (des) misses ttft_p90" in text
    )


@pytest.mark.parametrize(
    ("slo", "limited_by", "said"),
    [
        (None, "range", "misses an SLO by 100%; limited by the count range"),  # an aggregate screen's
        ("ttft_p50", "latency", "misses ttft_p50 by 100%; limited by the machines' own latency"),
    ],
)
def test_an_infeasible_line_names_the_slo_and_the_limit(slo, limited_by, said):
    from splitplan.report.render import infeasible_line

    r = replace(
        _result(False),
        meets_slo=False,
        closest={"prompt_machines": 2, "token_machines": 1, "machines": 3, "decided_by": "analytic"},
        shortfall={"slo": slo, "margin": -0.5, "over_limit": 1.0, "unstable": False},
        limited_by=limited_by,
    )
    assert said in infeasible_line(r)
