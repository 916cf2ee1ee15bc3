"""The one tie-break rule (search.objective): vectorized best_index = min of the scalar rank_key."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from splitplan.errors import InputError
from splitplan.search.objective import Engine, Objective, best_index, parse_enum, rank_key

point = st.tuples(
    st.sampled_from([100.0, 266.0, 266.0 + 1e-12, 304.0]),  # cost (with a float-noise tie)
    st.sampled_from([30.0, 39.2, 41.0]),  # power
    st.sampled_from([0.5, 1.0, 1.5]),  # rate factor
    st.integers(1, 5),  # prompt
    st.integers(0, 5),  # token
    st.booleans(),  # ok
)


@pytest.mark.parametrize("objective", list(Objective))
@given(pts=st.lists(point, min_size=1, max_size=12))
def test_vectorized_best_is_the_minimum_rank_key(objective: Objective, pts: list[tuple]) -> None:
    cost, power, rate, p, t, ok = (np.array(c) for c in zip(*pts, strict=True))
    got = best_index(objective, ok, cost=cost, power=power, rate=rate, machines=p + t, prompt=p)
    keys = [
        rank_key(objective, cost=c, power=w, rate=r, machines=pp + tt, prompt=pp)
        for c, w, r, pp, tt, _ in pts
    ]
    ok_idx = [i for i in range(len(pts)) if ok[i]]
    if not ok_idx:
        assert got is None
        return
    assert got is not None
    assert keys[got] == min(keys[i] for i in ok_idx)


def test_order_is_score_then_cost_then_power_then_machines_then_prompt() -> None:
    def key(**kw: float) -> tuple:
        base = {"cost": 266.0, "power": 39.2, "rate": 1.0, "machines": 7, "prompt": 4}
        return rank_key(Objective.COST, **{**base, **kw})  # type: ignore[arg-type]

    assert key(cost=265.0) < key()
    assert key(power=39.0) < key()
    assert key(machines=6) < key()
    assert key(prompt=3) < key()
    assert key(cost=266.0 + 1e-12) == key()  # equal list-price sums tie
    hi = rank_key(Objective.THROUGHPUT, cost=500, power=50, rate=2.0, machines=9, prompt=5)
    lo = rank_key(Objective.THROUGHPUT, cost=100, power=10, rate=1.0, machines=2, prompt=1)
    assert hi < lo  # throughput is maximized before cost counts


def test_enums_parse_their_strings_and_name_the_parameter() -> None:
    assert parse_enum(Engine, "des", "engine") is Engine.DES
    assert parse_enum(Objective, Objective.POWER, "objective") is Objective.POWER
    with pytest.raises(InputError, match=r"^engine must be one of hybrid, analytic, des"):
        parse_enum(Engine, "exhaustive", "engine")
