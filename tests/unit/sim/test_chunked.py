"""Chunked prefill (BatchPolicy.CHUNKED) in the DES proves itself against mixed batching and bounds."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from splitplan.catalog import get_model
from splitplan.design import BatchPolicy, ClusterConfig, custom_design, get_design
from splitplan.perf import kv_capacity_bytes
from splitplan.sim.config import SimConfig
from splitplan.sim.des import simulate_des
from splitplan.sim.scenario import Scenario
from splitplan.workload import Workload, make_workload


def scenario(wl: Workload, model: str = "llama2-70b", **sim) -> Scenario:
    return Scenario(workload=wl, model=get_model(model), sim=SimConfig(**sim))


@pytest.fixture(scope="module")
def coding() -> Workload:
    return make_workload("coding", rate_rps=8, duration_s=20, seed=3)


def test_named_designs_are_chunked_baselines():
    for name, gpu in (("chunked-a100", "dgx-a100"), ("chunked-h100", "dgx-h100")):
        d = get_design(name)
        assert d.is_baseline
        assert d.policy is BatchPolicy.CHUNKED
        assert d.prompt.type.name == gpu
    assert get_design("baseline-a100").policy is BatchPolicy.MIXED


@pytest.mark.parametrize("machines", [2, 4])
def test_budget_above_every_prompt_without_decode_priority_is_mixed_batching(coding, machines):
    # The budget exceeds the trace's total prompt tokens, so no prompt is ever cut, and prompts go
    # first: the chunked policy must form exactly the mixed-batching iterations (whose batch-token
    # cap is set to the same value) and give the same per-request results.
    budget = int(coding.prompt_tokens.sum())
    base = simulate_des(
        ClusterConfig.baseline(get_design("baseline-a100"), machines),
        scenario(coding, max_batch_tokens=budget),
    )
    chunk = simulate_des(
        ClusterConfig.baseline(get_design("chunked-a100"), machines),
        scenario(coding, chunk_tokens=budget, chunk_decodes_first=False),
    )
    a, b = base.per_request, chunk.per_request
    np.testing.assert_array_equal(a.ttft_s, b.ttft_s)
    np.testing.assert_array_equal(a.e2e_s, b.e2e_s)
    np.testing.assert_array_equal(a.queue_s, b.queue_s)
    np.testing.assert_array_equal(a.preemptions, b.preemptions)
    np.testing.assert_array_equal(a.prompt_machine, b.prompt_machine)
    assert base.extra["iterations"] == chunk.extra["iterations"]
    # not vacuous: the policy's own code ran iterations with several prompts co-batched
    assert chunk.extra["chunk_iterations"] > 0
    assert chunk.extra["max_chunk_tokens"] > coding.prompt_tokens.max()


@pytest.mark.parametrize("budget", [64, 256, 512, 1000])
def test_no_iteration_exceeds_the_budget_and_prompts_are_really_chunked(coding, budget):
    res = simulate_des(
        ClusterConfig.baseline(get_design("chunked-h100"), 3), scenario(coding, chunk_tokens=budget)
    )
    assert res.completed == coding.n
    assert 0 < res.extra["max_chunk_tokens"] <= budget
    # a prompt of p tokens needs ⌈p / budget⌉ iterations before its first token
    sc = scenario(coding)
    one_token_s = float(sc.perf_model(get_design("chunked-h100").prompt).prompt_time_s(1.0))
    pieces = np.ceil(coding.prompt_tokens / budget)
    assert np.all(res.per_request.ttft_s >= pieces * one_token_s * (1 - 1e-9))


@pytest.mark.parametrize("budget", [256, 512])
def test_p99_tbt_on_a_saturated_trace_is_bounded_by_the_iteration_at_the_budget(budget):
    wl = make_workload("conversation", rate_rps=60, duration_s=30, seed=5)
    design = get_design("chunked-h100")
    sc = scenario(wl, chunk_tokens=budget)
    res = simulate_des(ClusterConfig.baseline(design, 4), sc)
    assert res.stable
    assert res.completed == wl.n
    assert res.utilization["machines"] > 0.9  # saturated
    # the longest iteration: the budget's tokens plus the KV context a machine can hold
    perf = sc.perf_model(design.prompt)
    cap_tokens = kv_capacity_bytes(sc.model, design.prompt, sc.weight_bytes) / sc.kv_bytes_per_token
    bound_s = float(perf.mixed_time_s(float(budget), cap_tokens))
    assert res.extra["max_chunk_iteration_s"] <= bound_s
    assert res.latency_s["tbt_p99"] <= res.extra["max_chunk_iteration_s"]
    # the 2023 baseline on the same trace stalls decodes behind whole prompts: above the bound
    mixed = simulate_des(ClusterConfig.baseline(get_design("baseline-h100"), 4), scenario(wl))
    assert mixed.latency_s["tbt_p99"] > bound_s


def test_same_inputs_same_results(coding):
    cfg = ClusterConfig.baseline(get_design("chunked-a100"), 3)
    a = simulate_des(cfg, scenario(coding))
    simulate_des(ClusterConfig.baseline(get_design("baseline-a100"), 3), scenario(coding))
    b = simulate_des(cfg, scenario(coding))
    np.testing.assert_array_equal(a.per_request.e2e_s, b.per_request.e2e_s)
    np.testing.assert_array_equal(a.per_request.ttft_s, b.per_request.ttft_s)
    assert a.slowdown == b.slowdown
    timing = {"sim_cpu_s"}  # the run's CPU time, not a result
    assert {k: v for k, v in a.extra.items() if k not in timing} == {
        k: v for k, v in b.extra.items() if k not in timing
    }
    assert a.extra["chunk_iterations"] > 0


@settings(max_examples=12, deadline=None)
@given(
    machines=st.integers(1, 4),
    budget=st.integers(8, 2048),
    decodes_first=st.booleans(),
    seed=st.integers(0, 10_000),
)
def test_conservation_under_tight_memory(machines, budget, decodes_first, seed):
    # BLOOM-176B on A100s leaves room for few requests' KV: partial prompts hold theirs across
    # iterations, and every request still completes exactly once
    wl = make_workload("coding", rate_rps=2, duration_s=10, seed=seed)
    res = simulate_des(
        ClusterConfig.baseline(get_design("chunked-a100"), machines),
        scenario(wl, model="bloom-176b", chunk_tokens=budget, chunk_decodes_first=decodes_first),
    )
    pr = res.per_request
    if res.stable:
        assert res.completed == wl.n
        assert np.all(pr.ttft_s > 0)
        assert np.all(pr.e2e_s >= pr.ttft_s)
        assert np.all(pr.queue_s >= 0)
        assert res.extra["max_chunk_tokens"] <= budget
    assert np.all((pr.prompt_machine >= 0) & (pr.prompt_machine < machines))


def test_split_design_mixed_pool_runs_chunked_prefill():
    # an overloaded prompt pool sends prompts to token machines borrowed into the mixed pool; those
    # run chunked prefill, the prompt and token pools keep their own batching
    wl = make_workload("coding", rate_rps=30, duration_s=20, seed=2)
    plain = custom_design("dgx-h100", "dgx-h100")
    chunked = custom_design("dgx-h100", "dgx-h100", policy=BatchPolicy.CHUNKED)
    runs = [
        simulate_des(
            ClusterConfig(design=d, prompt_machines=2, token_machines=4), scenario(wl, chunk_tokens=128)
        )
        for d in (plain, chunked)
    ]
    for r in runs:
        assert r.completed == wl.n
        assert r.extra["pool_moves"] > 0
    assert 0 < runs[1].extra["max_chunk_tokens"] <= 128
    assert not np.array_equal(runs[0].per_request.e2e_s, runs[1].per_request.e2e_s)
