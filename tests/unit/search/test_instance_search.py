"""TP and precision per pool as search dimensions: small spaces are exhaustive per combination,
merged into one row per design; large ones go to Optuna with categorical TP/precision."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
from search_fakes import FakeEvaluator

from splitplan.design import custom_design
from splitplan.errors import InputError
from splitplan.search import DesignSpace, PoolSpace, SearchProblem, run_search
from splitplan.search.instances import combinations, expands


@dataclass
class TpEvaluator(FakeEvaluator):
    """Capacity per instance grows sublinearly with TP (all-reduce overhead), and an fp8 instance
    serves 1.5× an fp16 one: the cheapest TP is not the node."""

    exponent: float = 0.8

    def true_margin(self, design, p, t, f):
        import numpy as np

        def speed(m) -> float:
            fp8 = 1.5 if m.weight_precision.value == "fp8" else 1.0
            return 2.0 * (m.tensor_parallel / 8) ** self.exponent * fp8

        p = np.asarray(p, dtype=float)
        t = np.asarray(t, dtype=float)
        if design.is_baseline:
            return p * speed(design.prompt) / (self.prompt_need + self.token_need) * 1.2 / f - 1.0
        return np.minimum(
            p * speed(design.prompt) / self.prompt_need / f - 1.0,
            t * speed(design.token) / self.token_need / f - 1.0,
        )


def _space(baseline: bool = False) -> DesignSpace:
    return DesignSpace(
        name="custom-h100",
        baseline=baseline,
        prompt=PoolSpace(gpus=("dgx-h100",), tps=(2, 4, 8)),
        token=PoolSpace(gpus=("dgx-h100",), tps=(1, 2, 8), precisions=("fp16", "fp8")),
        prompt_range=(1, 40),
        token_range=(1, 24),
    )


def _brute_force(ev, space: DesignSpace):
    best = None
    for sub in combinations(space):
        d = sub.design()
        for p in range(sub.prompt_range[0], sub.prompt_range[1] + 1):
            for t in [0] if space.baseline else range(sub.token_range[0], sub.token_range[1] + 1):
                if float(ev.true_margin(d, p, t, 1.0)) < 0:
                    continue
                nodes = d.prompt.nodes_for(p) + (0 if space.baseline else d.token.nodes_for(t))
                cost = p * d.prompt.cost_usd_per_h + (0 if space.baseline else t * d.token.cost_usd_per_h)
                key = (round(cost, 9), nodes)
                if best is None or key < best[0]:
                    best = (
                        key,
                        d.prompt.tensor_parallel,
                        d.token.tensor_parallel,
                        d.token.weight_precision.value,
                    )
    return best


@pytest.mark.parametrize("baseline", [False, True])
@pytest.mark.parametrize("engine", ["hybrid", "des"])
def test_small_instance_spaces_are_exact_over_every_combination(baseline: bool, engine: str) -> None:
    space = _space(baseline)
    ev = TpEvaluator(prompt_need=8.0, token_need=2.0, bias=0.05, noise=0.02)
    pb = SearchProblem(spaces=(space,), engine=engine)
    assert expands(pb, space)
    out = run_search(pb, ev)
    (res,) = out.results
    (cost, nodes), tp_p, tp_t, prec = _brute_force(ev, space)
    assert res.design == "custom-h100"
    assert res.meets_slo
    assert res.method == "grid"
    assert res.cost_usd_per_h == pytest.approx(cost)
    assert res.machines == nodes
    assert res.prompt_tp == tp_p
    if not baseline:
        assert (res.token_tp, res.token_precision) == (tp_t, prec)
        assert res.token_instances is not None
        assert res.machines == (-(-res.prompt_instances * tp_p // 8) + -(-res.token_instances * tp_t // 8))
    # every point is labelled with the design and says its instances
    assert {r.design for r in out.points} == {"custom-h100"}
    assert {r.prompt_tp for r in out.points} == {2, 4, 8}


def test_an_instance_space_nowhere_feasible_says_which_combination_came_closest() -> None:
    """Every combination infeasible: the row is the closest combination's, its closest
    configuration, shortfall and limit kept (they had been dropped for an empty row)."""
    space = replace(_space(), prompt_range=(1, 3), token_range=(1, 2))
    out = run_search(SearchProblem(spaces=(space,)), TpEvaluator(prompt_need=400.0, token_need=2.0))
    (res,) = out.results
    assert not res.meets_slo
    assert res.design == "custom-h100"
    assert res.closest is not None
    assert res.shortfall is not None
    assert res.limited_by == "range"
    margins = [r.des_margin for r in out.points if r.decided_by.value == "des"]
    assert res.shortfall["margin"] == pytest.approx(max(margins), abs=1e-6)
    assert (res.closest["prompt_tp"], res.closest["token_tp"]) == (res.prompt_tp, res.token_tp)
    assert res.closest["prompt_instances"] is not None


def test_sub_grids_keep_the_node_budget() -> None:
    subs = combinations(_space())
    assert len(subs) == 3 * 6
    by_tp = {(s.prompt.tps[0], s.token.tps[0]): s for s in subs}
    assert by_tp[(2, 1)].prompt_range == (1, 40)
    assert by_tp[(2, 1)].token_range == (1, 24)
    assert by_tp[(8, 8)].prompt_range == (1, 10)
    assert by_tp[(8, 8)].token_range == (1, 3)


def test_large_instance_spaces_go_to_optuna_with_categorical_tp() -> None:
    space = DesignSpace(
        name="custom-h100",
        baseline=False,
        prompt=PoolSpace(gpus=("dgx-h100",), tps=(2, 4, 8)),
        token=PoolSpace(gpus=("dgx-h100",), tps=(1, 2, 4, 8), precisions=("fp8",)),
        prompt_range=(1, 156),
        token_range=(1, 312),
    )
    pb = SearchProblem(spaces=(space,), trials=60)
    assert not expands(pb, space)
    assert pb.method_for(space) == "optuna"
    out = run_search(pb, TpEvaluator(prompt_need=8.0, token_need=2.0))
    (res,) = out.results
    assert res.meets_slo
    assert res.method == "optuna"
    assert res.verified_by == "des"
    assert res.prompt_tp in (2, 4, 8)
    assert res.token_tp in (1, 2, 4, 8)
    assert res.token_precision == "fp8"
    assert {r.token_tp for r in out.points} > {res.token_tp}  # TP was searched


def test_a_bad_instance_choice_is_one_line_naming_it() -> None:
    with pytest.raises(InputError, match="does not divide the 8 GPUs"):
        PoolSpace(gpus=("dgx-h100",), tps=(3,))
    with pytest.raises(InputError, match=r"dgx-a100.*no fp8 support"):
        PoolSpace(gpus=("dgx-a100", "dgx-h100"), precisions=("fp8",))
    with pytest.raises(InputError, match="repeat"):
        PoolSpace(gpus=("dgx-h100",), tps=(2, 2))


def test_paper_instances_keep_the_paper_design() -> None:
    from splitplan.design import get_design
    from splitplan.search import paper_space

    for name in ("splitwise-hh", "splitwise-hhcap", "baseline-a100"):
        assert paper_space(name).design() == get_design(name)
    d = custom_design("dgx-h100", token_tp=2, token_precision="fp8")
    assert d.token.name == "dgx-h100/tp2/fp8"
    assert d.prompt.name == "dgx-h100"


@pytest.mark.parametrize("baseline", [False, True])
def test_a_budget_spans_its_nodes_in_a_pools_smallest_instances(baseline: bool) -> None:
    """Under a throughput budget the count ranges follow from it in whole nodes, and a pool of
    TP-2 choices counts them in TP-2 instances: four to a node. They had been read as instances,
    which held a TP-8 choice to one node per pool (a search over TP 2 and 8 found a quarter of
    what the whole-node design alone found)."""
    from splitplan import api
    from splitplan.api._search import build_problem

    req = api.SearchRequest(
        designs=("baseline-h100",) if baseline else (),
        prompt_gpus=("h100",),
        token_gpus=() if baseline else ("h100",),
        prompt_tp=(2, 8),
        token_tp=None if baseline else (2, 8),
        objective="throughput",
        power_budget_kw=30.0,
        workload=api.WorkloadRequest(duration_s=10.0),
    )
    (space,) = [s for s in build_problem(req, 70.0).spaces if s.name.startswith("custom")]
    nodes = int(30.0 / 5.6)  # DGX-H100s the budget powers
    assert space.prompt_range == (1, (nodes if baseline else nodes - 1) * 4)
    if not baseline:
        assert space.token_range == (1, (nodes - 1) * 4)
        whole = combinations(space)[-1]  # TP 8 in both pools: whole nodes again
        assert (whole.prompt_range, whole.token_range) == ((1, nodes - 1), (1, nodes - 1))
