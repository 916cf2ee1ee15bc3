"""Pareto fronts: equal to a brute-force non-dominated set, optima follow the search's ranking,
throughput is a configuration's best feasible rate, and the figure is written in every format."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from splitplan.errors import InputError
from splitplan.report.pareto import candidates, config_label, design_markers, pareto_fronts, plot_pareto


def _pt(design, p, t, cost, power, rate, meets=True, within=True, by="des"):
    return {
        "design": design,
        "prompt_gpu": "dgx-h100",
        "token_gpu": "dgx-h100",
        "prompt_power_cap": 1.0,
        "token_power_cap": 1.0,
        "prompt_machines": p,
        "token_machines": t,
        "machines": p + t,
        "cost_usd_per_h": float(cost),
        "power_kw": float(power),
        "rate_rps": float(rate),
        "meets_slo": meets,
        "within_budget": within,
        "decided_by": by,
    }


def _dominated(c, others, y, maximize):
    better = (lambda a, b: a > b) if maximize else (lambda a, b: a < b)
    for o in others:
        no_worse = o["cost_usd_per_h"] <= c["cost_usd_per_h"] and (o[y] >= c[y] if maximize else o[y] <= c[y])
        strictly = o["cost_usd_per_h"] < c["cost_usd_per_h"] or better(o[y], c[y])
        if no_worse and strictly:
            return True
    return False


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 9), st.integers(1, 9), st.integers(1, 9), st.booleans()), max_size=40)
)
def test_fronts_are_the_non_dominated_sets(rows):
    pts = [_pt(f"d{i % 3}", i + 1, 1, c, pw, r, meets=m) for i, (c, pw, r, m) in enumerate(rows)]
    fronts = pareto_fronts(pts)
    feas = [p for p in pts if p["meets_slo"]]
    for front, y, maximize in (
        (fronts.cost_power, "power_kw", False),
        (fronts.cost_throughput, "rate_rps", True),
    ):
        values = {(c["cost_usd_per_h"], c[y]) for c in front}
        expected = {(c["cost_usd_per_h"], c[y]) for c in feas if not _dominated(c, feas, y, maximize)}
        assert values == expected
        assert len(values) == len(front)  # one configuration per front point
    if feas:
        assert fronts.optima["cost"]["cost_usd_per_h"] == min(p["cost_usd_per_h"] for p in feas)
        assert fronts.optima["power"]["power_kw"] == min(p["power_kw"] for p in feas)
        assert fronts.optima["throughput"]["rate_rps"] == max(p["rate_rps"] for p in feas)
    else:
        assert fronts.optima == {"cost": None, "power": None, "throughput": None}


def test_ties_follow_the_search_ranking():
    pts = [
        _pt("a", 5, 5, 100, 50, 10),
        _pt("b", 4, 6, 100, 40, 10),  # same cost, less power → cost-optimal
        _pt("c", 3, 3, 120, 40, 12),  # same power, dearer → not power-optimal
        _pt("d", 6, 6, 130, 60, 12),  # same rate as c, dearer → not throughput-optimal
    ]
    f = pareto_fronts(pts)
    assert (f.optima["cost"]["design"], f.optima["power"]["design"]) == ("b", "b")
    assert f.optima["throughput"]["design"] == "c"


def test_a_configuration_counts_once_at_its_best_feasible_rate():
    pts = [
        _pt("a", 2, 2, 10, 5, 30),
        _pt("a", 2, 2, 10, 5, 50),
        _pt("a", 2, 2, 10, 5, 70, meets=False),
        _pt("a", 3, 3, 15, 8, 90, within=False),
        _pt("a", 3, 3, 15, 8, float("nan")),
    ]
    cands = candidates(pts)
    assert len(cands) == 1
    assert cands[0]["rate_rps"] == 50


@pytest.mark.parametrize("ext", ["png", "svg", "pdf"])
def test_figure_in_every_format(tmp_path, ext):
    rng = np.random.default_rng(0)
    pts = [
        _pt(f"d{i % 4}", i, 1, *rng.uniform(1, 100, 3), by="des" if i % 2 else "dominance") for i in range(40)
    ]
    path = plot_pareto(tmp_path / f"f.{ext}", pareto_fronts(pts), title="t", dpi=50)
    magic = {"png": b"\x89PNG", "svg": b"<?xml", "pdf": b"%PDF"}[ext]
    assert path.read_bytes().startswith(magic)


def test_nothing_feasible_is_refused(tmp_path):
    with pytest.raises(InputError, match="nothing to plot"):
        plot_pareto(tmp_path / "f.png", pareto_fronts([_pt("a", 1, 1, 1, 1, 1, meets=False)]), title="t")
    assert list(tmp_path.iterdir()) == []


def test_baselines_stay_in_sight_beneath_split_designs_on_their_machines():
    """A baseline of N machines sits where a split design of P + T = N does, and where another
    baseline of the same machines does: each baseline gets a larger shape beneath, the next one
    on the same machine type a smaller one."""
    pts = [_pt("splitwise-hh", 2, 1, 114, 16.8, 70)]
    for name, gpu in (
        ("baseline-a100", "dgx-a100"),
        ("baseline-h100", "dgx-h100"),
        ("chunked-h100", "dgx-h100"),
    ):
        pts.append(
            _pt(name, 3, 0, 114, 16.8, 70)
            | {"prompt_machines": None, "token_machines": None, "prompt_gpu": gpu}
        )
    fronts = pareto_fronts(pts)
    shape, area = design_markers(fronts.candidates, fronts.designs)
    assert (shape["splitwise-hh"], shape["baseline-a100"], shape["baseline-h100"]) == ("o", "s", "s")
    assert shape["chunked-h100"] == "D"
    assert area["splitwise-hh"] < area["chunked-h100"] < area["baseline-h100"] == area["baseline-a100"]


def test_instances_on_the_same_nodes_are_two_configurations():
    """One and two TP-4 instances both fill one node: two configurations at two prices, each
    labelled by its instances (they had shared one identity, and the label of a whole node)."""
    one = _pt("custom", 1, 1, 28.5, 4.2, 30) | {"prompt_instances": 1, "token_instances": 1}
    two = _pt("custom", 1, 1, 47.5, 7.0, 30) | {"prompt_instances": 2, "token_instances": 1}
    for p in (one, two):
        p |= {"instances": p["prompt_instances"] + 1, "prompt_tp": 4, "token_tp": 2}
    cands = candidates([one, two])
    assert len(cands) == 2
    assert [config_label(c) for c in cands] == ["custom 1P×tp4+1T×tp2", "custom 2P×tp4+1T×tp2"]
    whole = _pt("splitwise-hh", 9, 3, 456, 67.2, 70) | {"prompt_instances": 9, "token_instances": 3}
    assert config_label(candidates([whole | {"prompt_tp": 8, "token_tp": 8}])[0]) == "splitwise-hh 9P+3T"
