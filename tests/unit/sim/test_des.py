"""The DES proves itself: closed forms, conservation, determinism, monotonicity, stability guard."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from splitplan.catalog import get_model
from splitplan.design import ClusterConfig, get_design
from splitplan.sim.config import SimConfig
from splitplan.sim.des import simulate_des
from splitplan.sim.scenario import Scenario
from splitplan.workload import Workload, make_workload


def scenario(wl: Workload, **sim) -> Scenario:
    return Scenario(workload=wl, model=get_model("llama2-70b"), sim=SimConfig(**sim))


def test_md1_waiting_time_matches_pollaczek_khinchine():
    # One baseline machine, prompts only (one output token), batching disabled by a 1-prompt batch:
    # constant service → M/D/1. Mean wait W = ρ·S / (2(1 − ρ)).
    rng = np.random.default_rng(3)
    n = 20000
    p = np.full(n, 1000)
    sc0 = scenario(Workload(arrival_s=np.array([0.0]), prompt_tokens=p[:1], output_tokens=np.ones(1, int)))
    s = float(sc0.perf_model(get_design("baseline-a100").prompt).prompt_time_s(1000))
    lam = 0.6 / s
    arr = np.cumsum(rng.exponential(1 / lam, n))
    wl = Workload(arrival_s=arr, prompt_tokens=p, output_tokens=np.ones(n, int))
    res = simulate_des(ClusterConfig.baseline(get_design("baseline-a100"), 1), scenario(wl, max_batch_size=1))
    wait = res.per_request.queue_s[2000:]
    rho = lam * s
    expected = rho * s / (2 * (1 - rho))
    assert wait.mean() == pytest.approx(expected, rel=0.08)
    assert res.per_request.ttft_s.min() == pytest.approx(s, rel=1e-9)


@pytest.fixture(scope="module")
def coding() -> Workload:
    return make_workload("coding", rate_rps=40, duration_s=30, seed=7)


def test_conservation_every_request_completes_once(coding):
    res = simulate_des(
        ClusterConfig(design=get_design("splitwise-hh"), prompt_machines=6, token_machines=3),
        scenario(coding),
    )
    pr = res.per_request
    assert res.completed == coding.n
    assert res.stable
    assert np.all(pr.ttft_s > 0)
    assert np.all(pr.e2e_s >= pr.ttft_s)
    assert np.all(pr.queue_s >= 0)
    assert np.all((pr.prompt_machine >= 0) & (pr.prompt_machine < 9))


def test_same_seed_same_results_and_interleaving_does_not_matter(coding):
    cfg = ClusterConfig(design=get_design("splitwise-ha"), prompt_machines=5, token_machines=4)
    other = ClusterConfig.baseline(get_design("baseline-a100"), 8)
    a = simulate_des(cfg, scenario(coding))
    simulate_des(other, scenario(coding))
    b = simulate_des(cfg, scenario(coding))
    np.testing.assert_array_equal(a.per_request.e2e_s, b.per_request.e2e_s)
    assert a.slowdown == b.slowdown


def test_more_token_machines_never_hurt_token_latency(coding):
    tbt = []
    for t in (2, 3, 4, 6, 8):
        cfg = ClusterConfig(design=get_design("splitwise-hh"), prompt_machines=8, token_machines=t)
        tbt.append(simulate_des(cfg, scenario(coding)).slowdown["tbt_p90"])
    assert all(b <= a * 1.02 for a, b in itertools.pairwise(tbt)), tbt


def test_overloaded_cluster_stops_with_unstable_verdict():
    wl = make_workload("coding", rate_rps=200, duration_s=600, seed=1)
    res = simulate_des(ClusterConfig.baseline(get_design("baseline-a100"), 2), scenario(wl, max_backlog_s=30))
    assert not res.stable
    assert not res.meets_slo
    assert res.completed < wl.n
    assert res.sim_wall_s < 5


@settings(max_examples=15, deadline=None)
@given(n_p=st.integers(1, 6), n_t=st.integers(1, 6), seed=st.integers(0, 10_000))
def test_split_design_conserves_requests(n_p, n_t, seed):
    wl = make_workload("conversation", rate_rps=5, duration_s=10, seed=seed)
    res = simulate_des(
        ClusterConfig(design=get_design("splitwise-aa"), prompt_machines=n_p, token_machines=n_t),
        scenario(wl),
    )
    if res.stable:
        assert res.completed == wl.n
        pr = res.per_request
        assert np.all(np.isfinite(pr.tbt_s))
        assert np.all(pr.tbt_s >= 0)


def test_overload_deadlock_is_reported_not_hidden():
    # BLOOM without GQA on A100s: every request queued at once fills the KV memory with prompts.
    wl0 = make_workload("conversation", rate_rps=70, duration_s=30, seed=2)
    wl = Workload(arrival_s=np.zeros(wl0.n), prompt_tokens=wl0.prompt_tokens, output_tokens=wl0.output_tokens)
    base = {"kv_bytes": "no_gqa", "max_backlog_s": 1e9, "weight_bytes": {"bloom-176b": 329e9}}
    cfg = ClusterConfig.baseline(get_design("baseline-a100"), 4)

    def run(reserve: bool):
        sc = Scenario(
            workload=wl,
            model=get_model("bloom-176b"),
            sim=SimConfig(prompt_reserves_decode_kv=reserve, **base),
        )
        return simulate_des(cfg, sc)

    stuck = run(False)
    assert not stuck.stable
    assert stuck.completed < wl.n
    assert "deadlock" in stuck.notes[0]
    done = run(True)
    assert done.stable
    assert done.completed == wl.n


@pytest.mark.parametrize(
    ("curves", "pair_s", "lone_s"), [("by-count", 0.030, 0.030), ("pooled", 0.025, 0.035)]
)
def test_prompt_iterations_are_timed_by_their_prompt_count(tmp_path, curves, pair_s, lone_s):
    # lone prompts: 10 ms per 100 tokens; batches: 100×2 → 30 ms, 100×4 → 50 ms (pooled: 25, 45 ms)
    rows = [(100, 1, 10), (200, 1, 20), (400, 1, 40), (100, 2, 30), (100, 4, 50)]
    profile = tmp_path / "p.csv"
    profile.write_text(
        "model,hardware,prompt_size,batch_size,token_size,prompt_time,token_time,"
        "tensor_parallel\n" + "".join(f"llama2-70b,a100-80gb,{p},{b},128,{ms},20,8\n" for p, b, ms in rows)
    )
    wl = Workload(
        arrival_s=np.array([0.0, 0.0, 0.0, 10.0]),
        prompt_tokens=np.array([100, 100, 100, 300]),
        output_tokens=np.ones(4, int),
    )
    sc = Scenario(
        workload=wl,
        model=get_model("llama2-70b"),
        perf=str(profile),
        sim=SimConfig(profile_prompt_curves=curves),
    )
    res = simulate_des(ClusterConfig.baseline(get_design("baseline-a100"), 1), sc)
    # the first prompt starts alone (10 ms), the two that queued behind it share one 200-token
    # iteration, the last runs alone on 300 tokens
    expected = [0.010, 0.010 + pair_s, 0.010 + pair_s, lone_s]
    np.testing.assert_allclose(res.per_request.ttft_s, expected, rtol=1e-9)


@pytest.mark.parametrize(
    ("prompt", "output", "names"),
    [
        (3_000_000, 10, "a request of 3,000,000 prompt tokens needs"),
        (100, 10**12, "a request of 100 prompt and 1,000,000,000,000 output tokens needs"),
    ],
)
def test_a_request_too_large_for_memory_is_named_by_what_outgrows_it(prompt, output, names):
    from splitplan.errors import InputError

    wl = Workload(arrival_s=np.zeros(1), prompt_tokens=np.array([prompt]), output_tokens=np.array([output]))
    cfg = ClusterConfig(design=get_design("splitwise-hh"), prompt_machines=2, token_machines=2)
    with pytest.raises(InputError) as exc:
        simulate_des(cfg, scenario(wl))
    msg = str(exc.value)
    assert msg.startswith(names)
    assert "GB of KV cache, more than the" in msg
    assert "dgx-h100" in msg
