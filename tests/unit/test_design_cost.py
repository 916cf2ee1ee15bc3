"""Cost and power of pool counts: one vectorized rule (`Design.cost_usd_per_h` / `power_kw`)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from splitplan.design import PAPER_DESIGNS, ClusterConfig, get_design


@pytest.mark.parametrize("name", PAPER_DESIGNS)
@given(p=st.integers(1, 80), t=st.integers(1, 80))
def test_vectorized_cost_and_power_equal_the_per_machine_sum(name: str, p: int, t: int) -> None:
    d = get_design(name)
    tt = 0 if d.is_baseline else t
    cfg = ClusterConfig(design=d, prompt_machines=p, token_machines=tt)
    want_cost = p * d.prompt.cost_usd_per_h + tt * d.token.cost_usd_per_h
    want_power = p * d.prompt.power_kw + tt * d.token.power_kw
    assert cfg.cost_usd_per_h == pytest.approx(want_cost, rel=1e-12)
    assert cfg.power_kw == pytest.approx(want_power, rel=1e-12)
    grid = d.cost_usd_per_h(np.array([p, p + 1]), np.array([tt, tt]))
    assert grid[0] == pytest.approx(want_cost, rel=1e-12)
    assert grid[1] == pytest.approx(want_cost + d.prompt.cost_usd_per_h, rel=1e-12)


def test_a_baseline_counts_one_pool_whatever_the_token_count() -> None:
    d = get_design("baseline-h100")
    assert float(d.cost_usd_per_h(7, 5)) == float(d.cost_usd_per_h(7)) == 7 * d.prompt.cost_usd_per_h
    assert float(d.power_kw(7, 5)) == 7 * d.prompt.power_kw
