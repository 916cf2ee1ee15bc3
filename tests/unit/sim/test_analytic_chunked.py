"""The analytic evaluator's chunked-prefill model: its prefill tables, refusals, monotonicity."""

from __future__ import annotations

import numpy as np
import pytest

from splitplan.catalog import get_model
from splitplan.design import BatchPolicy, custom_design, get_design
from splitplan.errors import InputError
from splitplan.sim.analytic import chunked_prefill_tables, evaluate_grid
from splitplan.sim.config import SimConfig
from splitplan.sim.scenario import Scenario
from splitplan.workload import make_workload


def scenario(**sim) -> Scenario:
    wl = make_workload("conversation", rate_rps=40, duration_s=60, seed=1)
    return Scenario(workload=wl, model=get_model("llama2-70b"), sim=SimConfig(**sim))


def test_prefill_tables_sum_the_chunk_iterations_one_by_one():
    sc = scenario()
    perf = sc.perf_model(get_design("chunked-h100").prompt)
    prompts = np.array([1.0, 100.0, 511.0, 512.0, 513.0, 3000.0])
    decodes = np.array([0.0, 7.0, 300.0, 600.0])
    budget, ctx_per_req = 512.0, 900.0
    k, prefill, tau = chunked_prefill_tables(perf, prompts, decodes, ctx_per_req, budget)
    for i, n in enumerate(decodes):
        room = max(budget - n, 1.0)
        for j, p in enumerate(prompts):
            done, total, count = 0.0, 0.0, 0
            while done < p:
                piece = min(room, p - done)
                total += float(perf.mixed_time_s(n + piece, n * ctx_per_req + done))
                done += piece
                count += 1
            assert k[i, j] == count
            assert prefill[i, j] == pytest.approx(total, rel=1e-9)
        assert tau[i] == pytest.approx(float(perf.token_time_s(max(n, 1.0), max(n, 1.0) * ctx_per_req)))


def test_refuses_what_it_does_not_model():
    n = np.array([4])
    split = custom_design("dgx-h100", "dgx-a100", policy=BatchPolicy.CHUNKED)
    with pytest.raises(InputError, match="baseline designs only"):
        evaluate_grid(split, n, n, scenario())
    with pytest.raises(InputError, match="decodes first"):
        evaluate_grid(get_design("chunked-a100"), n, np.zeros_like(n), scenario(chunk_decodes_first=False))


def test_more_machines_never_hurt_and_the_budget_takes_effect():
    n = np.arange(4, 60)
    z = np.zeros_like(n)
    b = evaluate_grid(get_design("chunked-a100"), n, z, scenario())
    assert np.all(np.diff(b.margin) >= -1e-9)
    assert np.all(np.diff(b.slowdown["ttft_p90"]) <= 1e-9)
    # a smaller budget cuts prompts into more pieces, each paying an iteration's fixed cost
    small = evaluate_grid(get_design("chunked-a100"), n, z, scenario(chunk_tokens=128))
    assert np.all(small.slowdown["ttft_p50"] > b.slowdown["ttft_p50"])
