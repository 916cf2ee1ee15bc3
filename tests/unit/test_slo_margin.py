"""The one SLO margin rule (splitplan.slo.slo_margins): edges, binding names, vectorized = scalar."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from splitplan.slo import SLO_KEYS, SloSpec, headroom, limit_names, slo_margins, verdict


def test_headroom_edges() -> None:
    h = headroom(2.0, [1.0, 2.0, 4.0, 0.0, math.nan, math.inf, -math.inf, -1.0])
    assert h[:3].tolist() == [1.0, 0.0, -0.5]
    assert h[3] == math.inf  # instant meets any positive limit
    assert np.all(h[4:] == -math.inf)  # unserved, unbounded or invalid values fail


def test_latency_limit_binds_by_its_own_name() -> None:
    spec = SloSpec(latency_s={"ttft_p99": 0.5})
    slowdown = dict.fromkeys(SLO_KEYS, 1.0)  # every slowdown has headroom ≥ 0.25
    latency = dict.fromkeys(SLO_KEYS, 0.1)
    latency["ttft_p99"] = 0.6
    v = verdict(spec, slowdown, latency)
    assert v.binding == "ttft_p99_latency"
    assert not v.meets
    assert v.headroom == pytest.approx(0.5 / 0.6 - 1)


def test_unstable_points_fail_and_keep_the_slo_name() -> None:
    spec = SloSpec()
    sd = {k: np.array([1.0, 1.0]) for k in SLO_KEYS}
    m = slo_margins(spec, sd, {}, stable=np.array([True, False]))
    assert m.meets.tolist() == [True, False]
    assert m.margin[1] == -math.inf
    assert m.binding[0] == m.binding[1] == "tbt_p50"  # 1.25 is the tightest Table VI limit


def test_nan_binds_even_when_other_limits_fail_by_a_finite_amount() -> None:
    spec = SloSpec()
    sd = dict.fromkeys(SLO_KEYS, 10.0)
    sd["e2e_p99"] = math.nan
    v = verdict(spec, sd, {})
    assert v.binding == "e2e_p99"
    assert v.headroom == -math.inf


values = st.one_of(
    st.floats(min_value=0.0, max_value=50.0),
    st.sampled_from([0.0, math.nan, math.inf, -math.inf, -1.0]),
)


@given(
    st.lists(st.tuples(*[values] * 9, values, values), min_size=1, max_size=8),
)
def test_vectorized_margin_equals_the_verdict_of_each_point(rows: list[tuple[float, ...]]) -> None:
    spec = SloSpec(latency_s={"ttft_p99": 0.5, "e2e_p50": 3.0})
    arr = np.array(rows, dtype=np.float64)
    sd = {k: arr[:, j] for j, k in enumerate(SLO_KEYS)}
    lat = dict.fromkeys(SLO_KEYS, np.zeros(len(arr)))
    lat = {**lat, "ttft_p99": arr[:, 9], "e2e_p50": arr[:, 10]}
    m = slo_margins(spec, sd, lat)
    assert set(m.binding) <= set(limit_names(spec))
    for i in range(len(arr)):
        # the rule written out once more, per point in plain Python: limit/value − 1, 0 → +inf,
        # NaN/inf/negative → −inf, the first least-headroom limit binds
        best, name = math.inf, ""
        pairs = [(k, spec.slowdown[k], float(sd[k][i])) for k in spec.slowdown]
        pairs += [(f"{k}_latency", spec.latency_s[k], float(lat[k][i])) for k in spec.latency_s]
        for key, limit, x in pairs:
            h = math.inf if x == 0 else (limit / x - 1 if math.isfinite(x) and x > 0 else -math.inf)
            if h < best or not name:
                best, name = h, key
        assert m.margin[i] == best
        assert m.binding[i] == name
        v = verdict(spec, {k: float(sd[k][i]) for k in SLO_KEYS}, {k: float(lat[k][i]) for k in lat})
        assert (v.binding, v.headroom, v.meets) == (name, best, best >= 0)
