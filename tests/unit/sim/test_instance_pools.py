"""Simulators with instances of any TP and precision per pool: memory at each pool's precision, KV
transfers sized at the sender's, and a DES that never commits more KV than an instance holds."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from splitplan.catalog import get_model
from splitplan.design import ClusterConfig, custom_design, get_design
from splitplan.errors import InputError
from splitplan.sim import analytic
from splitplan.sim.config import SimConfig
from splitplan.sim.des import run as des_run
from splitplan.sim.des import simulate_des, transfer_times_s
from splitplan.sim.scenario import Scenario
from splitplan.workload import Workload

MODEL = "llama3.1-70b"


def _scenario(wl: Workload | None = None, model: str = MODEL, **sim) -> Scenario:
    wl = wl or Workload(
        arrival_s=np.array([0.0]), prompt_tokens=np.array([100]), output_tokens=np.array([10])
    )
    return Scenario(workload=wl, model=get_model(model), sim=SimConfig(**sim))


def test_paper_designs_keep_scenario_wide_memory() -> None:
    sc = _scenario(model="llama2-70b")
    for name in ("splitwise-hh", "splitwise-ha", "baseline-a100"):
        d = get_design(name)
        cfg = ClusterConfig(design=d, prompt_machines=1, token_machines=0 if d.is_baseline else 1)
        caps, weights, kv = des_run.memory_tables(sc, cfg)
        assert kv == sc.kv_bytes_per_token
        assert list(weights) == [sc.weight_bytes, sc.weight_bytes]
        assert list(caps) == [d.prompt.memory_bytes, d.token.memory_bytes]


def test_token_pool_memory_is_counted_at_its_own_precision() -> None:
    sc = _scenario()
    model = sc.model
    d = custom_design("dgx-h100", "dgx-h100", prompt_tp=4, token_tp=2, token_precision="fp8")
    caps, weights, kv = des_run.memory_tables(
        sc, ClusterConfig(design=d, prompt_machines=1, token_machines=1)
    )
    assert kv == model.kv_bytes_per_token_at(d.prompt.kv_precision)
    free_tokens = [(caps[c] - weights[c]) / kv for c in range(2)]
    expect = [
        (m.memory_bytes - model.weight_bytes_at(m.weight_precision))
        / model.kv_bytes_per_token_at(m.kv_precision)
        for m in (d.prompt, d.token)
    ]
    assert free_tokens == pytest.approx(expect, rel=1e-12)
    assert d.token.kv_precision.value == "fp8"  # the KV cache follows fp8 weights by default


@pytest.mark.parametrize("kv_transfer", ["serialized", "layerwise"])
def test_kv_transfer_is_sized_at_the_senders_precision_over_the_instances_link(kv_transfer: str) -> None:
    sc = _scenario(kv_transfer=kv_transfer, layerwise_min_prompt_tokens=10**9)
    p = np.array([1000.0, 4000.0])
    kv16 = sc.model.kv_bytes_per_token_at("fp16")

    def times(**kw):
        cfg = ClusterConfig(
            design=custom_design("dgx-h100", "dgx-h100", **kw), prompt_machines=1, token_machines=1
        )
        des = transfer_times_s(sc, cfg.design, p)
        np.testing.assert_array_equal(des, analytic.kv_transfer_s(sc, cfg.design, p))  # one rule
        return des

    whole = times()
    np.testing.assert_allclose(whole, p * kv16 / 400e9)
    # the receiver's precision does not change what is sent; the sender's does
    np.testing.assert_array_equal(times(token_precision="fp8"), whole)
    np.testing.assert_allclose(times(prompt_precision="fp8", token_precision="fp8"), whole / 2)
    np.testing.assert_allclose(times(prompt_kv_precision="fp8"), whole / 2)
    # a TP2 instance has 2 of the node's 8 NICs; the slower end sets the pace
    np.testing.assert_allclose(times(prompt_tp=2, token_tp=4), whole * 4)
    np.testing.assert_allclose(times(prompt_tp=8, token_tp=4), whole * 2)


def test_a_request_too_large_for_an_instance_is_refused() -> None:
    wl = Workload(arrival_s=np.array([0.0]), prompt_tokens=np.array([120_000]), output_tokens=np.array([2]))
    d = custom_design("dgx-h100", "dgx-h100", prompt_tp=2, token_tp=8)
    with pytest.raises(InputError, match=r"tp2.*larger tensor parallelism"):
        simulate_des(ClusterConfig(design=d, prompt_machines=1, token_machines=1), _scenario(wl))
    d8 = custom_design("dgx-h100", "dgx-h100", prompt_tp=2, token_tp=8, prompt_kv_precision="fp8")
    res = simulate_des(ClusterConfig(design=d8, prompt_machines=1, token_machines=1), _scenario(wl))
    assert res.completed == 1


# ------------------------------------------------------------------ committed KV ≤ capacity


def _decode_residency_peak(res, sc: Scenario, cfg: ClusterConfig) -> np.ndarray:
    """Per token machine: a lower bound on its peak committed KV bytes (at its own precision).

    A request decoding on machine m holds its prompt's and its output's KV there at least over
    [e2e − (o − 1)·τ_r, e2e): each of its o − 1 decode iterations lasts at least the fastest
    one-decode iteration plus the context term of its own prompt. The true peak is at least the
    largest sum of these overlapping holdings, so a DES that overcommits shows up here whenever
    memory is what limits the decode batch (long outputs keep the bound tight).
    """
    d = cfg.design
    n_tok = int(sc.workload.prompt_tokens.max()) + sc.sim.max_batch_size + sc.sim.max_batch_tokens + 2
    _ptab, ttab, tctx, mtab, mctx = des_run._tables(sc, cfg, n_tok, sc.sim.max_batch_size)
    rq = res.per_request
    kv_tok = sc.kv_bytes_per_token_on(d.token)
    tau = min(ttab[1, 1:].min(), mtab[1, 1:].min()) + min(tctx[1], mctx[1]) * rq.prompt_tokens
    peaks = np.zeros(cfg.token_machines)
    for m in range(cfg.token_machines):
        sel = (rq.token_machine == cfg.prompt_machines + m) & np.isfinite(rq.e2e_s)
        end = rq.e2e_s[sel]
        start = end - (rq.output_tokens[sel] - 1) * tau[sel]
        held = (rq.prompt_tokens[sel] + rq.output_tokens[sel]) * kv_tok
        times = np.r_[start, end]
        delta = np.r_[held, -held]
        order = np.lexsort((delta, times))  # releases before holdings at equal times
        peaks[m] = max(0.0, float(np.cumsum(delta[order]).max())) if len(order) else 0.0
    return peaks


def _tight_trace(n: int, seed: int) -> Workload:
    """Requests arriving at once with long outputs: the token instance's memory limits its batch."""
    rng = np.random.default_rng(seed)
    return Workload(
        arrival_s=np.sort(rng.uniform(0.0, 0.5, n)),
        prompt_tokens=rng.integers(200, 800, n),
        output_tokens=rng.integers(1500, 3000, n),
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    prompt_tp=st.sampled_from([2, 4, 8]),
    token_tp=st.sampled_from([1, 2, 4, 8]),
    prompt_kv=st.sampled_from(["fp16", "fp8"]),
    token_kv=st.sampled_from(["fp16", "fp8"]),
    token_w=st.sampled_from(["fp16", "fp8"]),
    n=st.integers(5, 120),
    seed=st.integers(0, 10_000),
)
def test_des_never_commits_more_kv_than_an_instance_holds(
    prompt_tp: int, token_tp: int, prompt_kv: str, token_kv: str, token_w: str, n: int, seed: int
) -> None:
    assume(token_tp > 1 or token_w == "fp8")  # 70B fp16 weights need more than one H100
    d = custom_design(
        "dgx-h100",
        "dgx-h100",
        prompt_tp=prompt_tp,
        token_tp=token_tp,
        prompt_kv_precision=prompt_kv,
        token_precision=token_w,
        token_kv_precision=token_kv,
    )
    sc = _scenario(_tight_trace(n, seed))
    cfg = ClusterConfig(design=d, prompt_machines=2, token_machines=1)
    res = simulate_des(cfg, sc)
    free = d.token.memory_bytes - sc.weight_bytes_on(d.token)
    assert (_decode_residency_peak(res, sc, cfg) <= free * (1 + 1e-12)).all()


def test_the_residency_check_catches_kv_counted_at_the_wrong_precision(monkeypatch) -> None:
    # fp8 KV on the prompt side, fp16 on the token side: counting the token instance in the
    # prompt's fp8 bytes without scaling its capacity would admit twice the decodes it can hold
    d = custom_design("dgx-h100", "dgx-h100", prompt_tp=8, token_tp=2, prompt_kv_precision="fp8")
    sc = _scenario(_tight_trace(120, 1))
    cfg = ClusterConfig(design=d, prompt_machines=2, token_machines=1)
    free = d.token.memory_bytes - sc.weight_bytes_on(d.token)
    good = _decode_residency_peak(simulate_des(cfg, sc), sc, cfg)
    assert good.max() <= free
    right = des_run.memory_tables

    def unscaled(scenario, config):
        caps, weights, kv = right(scenario, config)
        m = config.design.token
        return np.array([caps[0], m.memory_bytes]), np.array([weights[0], scenario.weight_bytes_on(m)]), kv

    monkeypatch.setattr(des_run, "memory_tables", unscaled)
    bad = _decode_residency_peak(simulate_des(cfg, sc), sc, cfg)
    assert bad.max() > free
