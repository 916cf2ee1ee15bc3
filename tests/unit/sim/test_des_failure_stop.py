"""A DES run that stops once an SLO is certain to fail (`simulate_des(stop_below_headroom=…)`).

The stop must never change a verdict: a run it stops fails, and the SLO it names ends the whole run
with a headroom below the bound; a run it does not stop is the same, bit for bit, as one without
checks. The certification itself (`failure_checks`) is checked against numpy's percentile on the
worst case: exactly `need` values just over the bound, every other value zero.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from splitplan.catalog import get_model
from splitplan.design import ClusterConfig, get_design
from splitplan.sim.des import simulate_des
from splitplan.sim.des.run import failure_checks
from splitplan.sim.scenario import Scenario
from splitplan.slo import SloSpec, headroom
from splitplan.workload import Workload, make_workload

LIMIT_KEYS = ("ttft_p50", "ttft_p90", "ttft_p99", "tbt_p50", "tbt_p90", "tbt_p99")


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=5000),
    key=st.sampled_from(LIMIT_KEYS),
    below=st.floats(min_value=-0.95, max_value=0.0),
    limit=st.floats(min_value=1e-3, max_value=1e3),
)
def test_need_values_over_the_bound_put_the_percentile_over_it(n, key, below, limit):
    spec = SloSpec(slowdown={key: limit})
    checks = failure_checks(spec, n, below)
    if not len(checks.metric):  # too few requests for the slack: nothing is certified early
        q = float(key.partition("_p")[2])
        assert n - math.floor(q / 100.0 * (n - 1)) + 1 > n
        return
    need, scale = int(checks.need[0]), float(checks.scale[0])
    assert 1 <= need <= n
    values = np.zeros(n)
    values[:need] = np.nextafter(scale, np.inf)  # the fewest over the bound, the rest as low as can be
    q = float(key.partition("_p")[2])
    pct = float(np.percentile(values, q))
    assert float(headroom(limit, pct)) < below


def test_no_bound_means_no_checks():
    assert len(failure_checks(SloSpec(), 1000, None).metric) == 0
    with pytest.raises(ValueError, match="below_headroom"):
        failure_checks(SloSpec(), 1000, 0.5)


def _scenario(rate: float = 40.0) -> Scenario:
    wl = make_workload("coding", rate_rps=rate, duration_s=30.0, seed=3)
    return Scenario(workload=wl, model=get_model("llama2-70b"))


def _split(p: int, t: int) -> ClusterConfig:
    return ClusterConfig(design=get_design("splitwise-hh"), prompt_machines=p, token_machines=t)


def test_a_clear_failure_stops_early_and_fails_as_the_whole_run_does():
    sc = _scenario()
    cfg = _split(6, 1)  # one token machine for 40 req/s: TBT far over its limits
    whole = simulate_des(cfg, sc)
    stopped = simulate_des(cfg, sc, stop_below_headroom=-0.5)
    assert not whole.meets_slo
    assert whole.verdict.headroom < -0.5
    assert stopped.extra["stopped_failing"] == 1.0
    assert not stopped.meets_slo
    assert stopped.extra["events"] < whole.extra["events"]
    # the SLO it names ends the whole run below the bound; the bound is what it reports
    name = stopped.verdict.binding
    assert float(headroom(sc.slo.slowdown[name], whole.slowdown[name])) < -0.5
    assert -0.5 - 1e-9 < stopped.verdict.headroom < -0.5
    assert all(math.isnan(v) for v in stopped.slowdown.values())
    assert stopped.per_request is None


@pytest.mark.parametrize(("p", "t"), [(6, 6), (7, 3)], ids=["passing", "failing-by-less"])
def test_a_run_not_stopped_is_the_run_without_checks(p, t):
    sc = _scenario()
    cfg = _split(p, t)
    whole = simulate_des(cfg, sc)
    checked = simulate_des(cfg, sc, stop_below_headroom=-0.5)
    assert "stopped_failing" not in checked.extra
    assert checked.verdict.headroom >= -0.5
    assert checked.slowdown == whole.slowdown
    assert checked.latency_s == whole.latency_s
    assert checked.verdict == whole.verdict
    np.testing.assert_array_equal(checked.per_request.e2e_s, whole.per_request.e2e_s)
    np.testing.assert_array_equal(checked.per_request.ttft_s, whole.per_request.ttft_s)


@pytest.mark.parametrize(("p", "t"), [(6, 1), (6, 3)])
def test_with_a_warm_up_the_certified_slo_fails_over_the_counted_requests(p, t):
    from dataclasses import replace

    sc = _scenario()
    warm = replace(sc, sim=replace(sc.sim, warmup_s=15.0))  # half the trace is not counted
    cfg = _split(p, t)
    whole = simulate_des(cfg, warm)
    stopped = simulate_des(cfg, warm, stop_below_headroom=-0.3)
    if "stopped_failing" not in stopped.extra:
        assert stopped.verdict == whole.verdict
        return
    name = stopped.verdict.binding
    assert float(headroom(sc.slo.slowdown[name], whole.slowdown[name])) < -0.3


def test_requests_before_the_warm_up_are_not_counted():
    from dataclasses import replace

    # a burst that swamps the cluster, then light load from the end of the warm-up on: the burst's
    # failures must not stop a run whose counted requests all meet their SLOs
    rng = np.random.default_rng(5)
    burst, light = 400, 60
    arrivals = np.r_[np.sort(rng.uniform(0.0, 1.0, burst)), 200.0 + 2.0 * np.arange(light)]
    wl = Workload(
        arrival_s=arrivals,
        prompt_tokens=rng.integers(200, 2000, burst + light),
        output_tokens=rng.integers(20, 200, burst + light),
    )
    sc = Scenario(workload=wl, model=get_model("llama2-70b"))
    sc = replace(sc, sim=replace(sc.sim, warmup_s=150.0))
    cfg = _split(2, 2)
    whole = simulate_des(cfg, sc)
    assert whole.meets_slo
    checked = simulate_des(cfg, sc, stop_below_headroom=-0.5)
    assert "stopped_failing" not in checked.extra
    assert checked.verdict == whole.verdict
