"""The hybrid engine returns the optimum an exhaustive DES sweep of the 39 × 39 grid finds.

Golden exhaustive results: tests/golden/search_exhaustive.json (regenerate with
`python tests/golden/regen_search.py`, ~10 min on 2 cores).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

GOLDEN_DIR = Path(__file__).resolve().parents[2] / "golden"
sys.path.insert(0, str(GOLDEN_DIR))
GOLDEN = json.loads((GOLDEN_DIR / "search_exhaustive.json").read_text())
SWEPT = 39  # the exhaustive sweep's pool sizes: 1..39 prompt and token machines

from regen_search import request  # noqa: E402

from splitplan.api import search  # noqa: E402


@pytest.mark.parametrize("case", GOLDEN["cases"], ids=lambda c: f"{c['design']}-{c['workload']}")
def test_hybrid_equals_exhaustive_des(case: dict) -> None:
    out = search(request(case["design"], case["workload"], "hybrid"))
    r = out.results[0]
    assert (r.prompt_machines, r.token_machines) == (case["prompt_machines"], case["token_machines"])
    assert r.cost_usd_per_h == pytest.approx(case["cost_usd_per_h"])
    assert r.verified_by == "des"
    assert out.des_evaluations < 0.15 * 39 * 39
    # away from DES non-monotone corners, every point is classified as the sweep classified it.
    # The sweep covers 1..39 per pool; the search's automatic box (twice the screen's smallest
    # passing diagonal) may reach beyond it, and points there have no verdict to compare with.
    feasible = {tuple(x) for x in case["feasible"]}
    swept = [p for p in out.points if p.prompt_machines <= SWEPT and p.token_machines <= SWEPT]
    wrong = [p for p in swept if p.meets_slo != ((p.prompt_machines, p.token_machines) in feasible)]
    assert len(swept) >= SWEPT * SWEPT
    assert len(wrong) <= 0.01 * len(swept)


@pytest.mark.parametrize(
    "case",
    [c for c in GOLDEN["cases"] if c["workload"] == "coding"],
    ids=lambda c: f"{c['design']}-{c['workload']}",
)
def test_optuna_on_the_2d_space_finds_the_exhaustive_optimum(case: dict) -> None:
    from dataclasses import replace

    req = replace(request(case["design"], case["workload"], "hybrid"), method="optuna", trials=200)
    r = search(req).results[0]
    assert r.method == "optuna"
    assert r.verified_by == "des"
    assert (r.prompt_machines, r.token_machines) == (case["prompt_machines"], case["token_machines"])
