"""A workload's request rate has one home (workload.base): the observed rate, the generator's
target, and the rate a plan is sized for (`offered_rate_rps`), which search, heatmap and the
deployment plan share."""

from __future__ import annotations

import numpy as np
import pytest

from splitplan.search.evaluate import scale_rate
from splitplan.workload import make_workload
from splitplan.workload.base import Workload


def test_generated_workload_offers_its_target_rate() -> None:
    wl = make_workload("coding", rate_rps=20.0, duration_s=30.0, seed=0)
    assert wl.target_rate_rps == 20.0
    assert wl.offered_rate_rps == 20.0
    assert wl.rate_rps != 20.0  # the sample's observed rate carries sampling noise
    assert wl.rate_rps == pytest.approx(wl.n / wl.arrival_s[-1])


def test_replayed_trace_offers_its_observed_rate() -> None:
    wl = Workload(
        arrival_s=np.array([0.0, 1.0, 2.0, 4.0]), prompt_tokens=np.ones(4), output_tokens=np.ones(4)
    )
    assert wl.target_rate_rps is None
    assert wl.offered_rate_rps == wl.rate_rps == 1.0


def test_a_rate_factor_scales_the_offered_rate() -> None:
    wl = make_workload("coding", rate_rps=20.0, duration_s=30.0, seed=0)
    fast = scale_rate(wl, 2.0)
    assert fast.offered_rate_rps == 40.0
    assert fast.rate_rps == pytest.approx(2 * wl.rate_rps)


def test_search_and_heatmap_size_for_the_same_rate() -> None:
    from splitplan import api

    scenario = api.build_scenario(workload=api.WorkloadRequest(rate_rps=20, duration_s=30), seed=0)
    design = api.resolve_design("splitwise-hh")
    hm = api.heatmap(design, scenario, (2, 4), (1, 2), "analytic")
    assert float(hm.meta["rate_rps"]) == scenario.workload.offered_rate_rps == 20.0


def test_the_interarrival_rate_ignores_when_the_trace_starts() -> None:
    # what a queue sees: three gaps over 3 s, whether the first request comes at 0 s or at 100 s
    ones = np.ones(4)
    early = Workload(arrival_s=np.array([0.0, 1.0, 2.0, 3.0]), prompt_tokens=ones, output_tokens=ones)
    late = Workload(arrival_s=np.array([100.0, 101.0, 102.0, 103.0]), prompt_tokens=ones, output_tokens=ones)
    assert early.interarrival_rate_rps == late.interarrival_rate_rps == 1.0
    assert late.rate_rps == pytest.approx(4 / 103)
