"""CI regression of known optimal configurations: the default (hybrid) search must find, for every
golden case, the optimum an exhaustive DES sweep found, with the same metrics."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from optima_cases import CASES, EXACT, PROFILE, RELATIVE, SLOWDOWN_RELATIVE  # noqa: E402
from regen_optima import solve  # noqa: E402

from splitplan.sim.config import shared_dir  # noqa: E402

GOLDEN = json.loads((HERE / "optima.json").read_text())["cases"]


def differences(expected: dict, got: dict) -> list[str]:
    """Readable lines `field: expected → got` for everything outside tolerance."""
    out = []
    for k in EXACT:
        if expected[k] != got[k]:
            out.append(f"{k}: {expected[k]} → {got[k]}")
    for k, tol in RELATIVE.items():
        e, g = expected[k], got[k]
        if (e is None) != (g is None) or (e is not None and not math.isclose(e, g, rel_tol=tol)):
            out.append(f"{k}: {e} → {g}")
    for k, e in expected["slowdown"].items():
        g = got["slowdown"][k]
        if (e is None) != (g is None) or (
            e is not None and not math.isclose(e, g, rel_tol=SLOWDOWN_RELATIVE)
        ):
            out.append(f"slowdown.{k}: {e} → {g}")
    return out


def test_golden_file_covers_the_whole_matrix():
    assert {c.id for c in CASES} == set(GOLDEN)
    assert {c.design for c in CASES} == {
        "baseline-a100",
        "baseline-h100",
        "splitwise-aa",
        "splitwise-hh",
        "splitwise-ha",
        "splitwise-hhcap",
    }
    assert {c.workload for c in CASES} == {"coding", "conversation"}
    assert {c.objective for c in CASES} == {"cost", "power", "throughput"}
    assert {c.budget for c in CASES} >= {"iso-power", "iso-cost"}
    assert {c.perf for c in CASES} == {"analytic", PROFILE}


def test_differences_are_reported_readably():
    e = GOLDEN[CASES[0].id]
    g = json.loads(json.dumps(e))
    g["token_machines"] = (g["token_machines"] or 0) + 1
    g["slowdown"]["tbt_p99"] = (g["slowdown"]["tbt_p99"] or 1.0) * 1.5
    lines = differences(e, g)
    assert any(line.startswith("token_machines:") for line in lines)
    assert any(line.startswith("slowdown.tbt_p99:") for line in lines)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_search_finds_the_golden_optimum(case):
    if (
        case.perf == PROFILE
        and not (shared_dir() / "reference" / "splitwise-sim" / "perf_model.csv").is_file()
    ):
        pytest.skip("reference profile not found in ../shared")
    got = solve(case, "hybrid")
    diff = differences(GOLDEN[case.id], got)
    assert not diff, f"{case.id} drifted:\n  " + "\n  ".join(diff)
