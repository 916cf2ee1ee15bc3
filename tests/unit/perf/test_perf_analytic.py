"""The analytic roofline: physical shape, affinity in context, power caps, every catalog pair."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from splitplan.catalog import Machine, get_machine_type, get_model, list_machine_types, list_models
from splitplan.errors import InputError
from splitplan.perf import PerfModel, get_perf_model, prompt_cap_factor, token_cap_factor
from splitplan.perf.analytic import (
    AnalyticCoefficients,
    AnalyticPerfModel,
    load_coefficients,
)
from splitplan.perf.analytic import (
    touched_weight_bytes as _touched_weight_bytes,
)

LLAMA = get_model("llama2-70b")
A100 = Machine(type=get_machine_type("dgx-a100"))
H100 = Machine(type=get_machine_type("dgx-h100"))


def test_implements_protocol_and_factory() -> None:
    pm = get_perf_model("analytic", LLAMA, H100)
    assert isinstance(pm, PerfModel)
    assert isinstance(pm, AnalyticPerfModel)
    assert pm.kind == "analytic"
    assert pm.model is LLAMA
    assert pm.machine is H100


@pytest.mark.parametrize("mtype", list_machine_types(), ids=lambda m: m.name)
@pytest.mark.parametrize("model", list_models(), ids=lambda m: m.name)
def test_every_catalog_pair_gives_finite_positive_times(mtype, model) -> None:
    for cap in (1.0, 0.7, 0.4):
        pm = AnalyticPerfModel(model, Machine(type=mtype, power_cap=cap))
        tokens = np.array([1, 128, 2048, 8192, 32768], dtype=float)
        batch = np.array([1, 8, 64, 512], dtype=float)
        for out in (
            pm.prompt_time_s(tokens),
            pm.token_time_s(batch, batch * 1000),
            pm.mixed_time_s(tokens, tokens * 10),
            pm.decode_alone_time_s(tokens),
        ):
            assert out.dtype == np.float64
            assert np.all(np.isfinite(out))
            assert np.all(out > 0)


def test_calibrated_flag_follows_the_shipped_file() -> None:
    shipped = load_coefficients()
    for mtype in list_machine_types():
        pm = AnalyticPerfModel(LLAMA, Machine(type=mtype))
        assert pm.calibrated == (mtype.gpu.name in shipped.gpus)
    assert AnalyticPerfModel(LLAMA, A100).calibrated
    assert not AnalyticPerfModel(LLAMA, Machine(type=get_machine_type("hgx-b200"))).calibrated


def test_broadcasting_shapes() -> None:
    pm = AnalyticPerfModel(LLAMA, A100)
    b = np.array([[1.0], [4.0], [16.0]])
    c = np.array([100.0, 1000.0])
    assert pm.token_time_s(b, c).shape == (3, 2)
    assert pm.mixed_time_s(b, c).shape == (3, 2)
    assert pm.prompt_time_s(np.ones((2, 5))).shape == (2, 5)
    assert pm.prompt_time_s(512).shape == ()


@pytest.mark.parametrize("model", list_models(), ids=lambda m: m.name)
@pytest.mark.parametrize("machine", [A100, H100, Machine(type=get_machine_type("l40s-8x"))], ids=str)
def test_monotone(model, machine) -> None:
    pm = AnalyticPerfModel(model, machine)
    n = np.arange(1, 40000, 97, dtype=float)
    assert np.all(np.diff(pm.prompt_time_s(n)) > 0)
    b = np.arange(1, 513, dtype=float)
    assert np.all(np.diff(pm.token_time_s(b, 5000.0)) > 0)
    ctx = np.linspace(0, 1e6, 50)
    assert np.all(np.diff(pm.token_time_s(8, ctx)) > 0)
    assert np.all(np.diff(pm.mixed_time_s(2048, ctx)) > 0)
    # A prompt iteration of n tokens costs more than one decode step.
    assert pm.prompt_time_s(2048) > pm.decode_alone_time_s(2048)


@settings(max_examples=60, deadline=None)
@given(
    b=st.integers(1, 1024),
    c0=st.floats(0, 1e6),
    c1=st.floats(0, 1e6),
    c2=st.floats(0, 1e6),
    model=st.sampled_from([m.name for m in list_models()]),
    mtype=st.sampled_from([m.name for m in list_machine_types()]),
    cap=st.floats(0.2, 1.0),
)
def test_token_and_mixed_are_affine_in_context(b, c0, c1, c2, model, mtype, cap) -> None:
    pm = AnalyticPerfModel(get_model(model), Machine(type=get_machine_type(mtype), power_cap=cap))
    f, g = pm.token_affine(b)
    for c in (c0, c1, c2):
        assert pm.token_time_s(b, c) == pytest.approx(f + g * c, rel=1e-12)
    # Mixed: the slope in context is the same g (reading the decodes' KV).
    m0, m1 = pm.mixed_time_s(b, c0), pm.mixed_time_s(b, c1)
    assert m1 - m0 == pytest.approx(g * (c1 - c0), rel=1e-9, abs=1e-12)


def test_decode_alone_is_one_decode() -> None:
    pm = AnalyticPerfModel(LLAMA, H100)
    ctx = np.array([1.0, 100.0, 10000.0])
    np.testing.assert_allclose(pm.decode_alone_time_s(ctx), pm.token_time_s(1, ctx))


def test_context_slope_is_kv_read_plus_attention() -> None:
    c = AnalyticCoefficients(bw_eff=0.5, token_flops_eff=0.25)
    pm = AnalyticPerfModel(LLAMA, A100, c)
    bw = 0.5 * 8 * A100.type.gpu.hbm_bytes_per_s
    flops = 0.25 * 8 * A100.type.gpu.fp16_flops
    attn = 4 * LLAMA.layers * LLAMA.heads * LLAMA.head_dim
    _, g = pm.token_affine(1)
    assert g == pytest.approx(LLAMA.kv_bytes_per_token / bw + attn / flops)


def test_decode_is_weight_bound_at_small_batch_and_compute_bound_at_large() -> None:
    c = AnalyticCoefficients(bw_eff=1.0, token_flops_eff=1.0, token_overhead_s=0.0, token_seq_s=0.0)
    pm = AnalyticPerfModel(LLAMA, A100, c)
    bw = 8 * A100.type.gpu.hbm_bytes_per_s
    f1, _ = pm.token_affine(1)
    assert f1 == pytest.approx((LLAMA.weight_bytes + LLAMA.kv_bytes_per_token) / bw)
    f_big, _ = pm.token_affine(4096)
    assert f_big == pytest.approx(2 * LLAMA.active_params * 4096 / (8 * A100.type.gpu.fp16_flops))


def test_faster_gpu_is_faster_with_equal_coefficients() -> None:
    c = AnalyticCoefficients()
    a, h = AnalyticPerfModel(LLAMA, A100, c), AnalyticPerfModel(LLAMA, H100, c)
    assert h.prompt_time_s(2048) < a.prompt_time_s(2048)
    assert h.token_time_s(64, 64 * 1000) < a.token_time_s(64, 64 * 1000)


def test_power_cap_scales_prompt_and_token_sides() -> None:
    for cap in (0.9, 0.7, 0.5, 0.3):
        capped = AnalyticPerfModel(LLAMA, Machine(type=H100.type, power_cap=cap))
        full = AnalyticPerfModel(LLAMA, H100)
        assert capped.prompt_time_s(1024) == pytest.approx(full.prompt_time_s(1024) * prompt_cap_factor(cap))
        expected = full.token_time_s(8, 8000) * token_cap_factor(cap)
        assert capped.token_time_s(8, 8000) == pytest.approx(expected)
    # The paper's capped H100: prompt × 1.3, token unchanged.
    capped = AnalyticPerfModel(LLAMA, Machine(type=H100.type, power_cap=0.7))
    full = AnalyticPerfModel(LLAMA, H100)
    assert capped.prompt_time_s(512) / full.prompt_time_s(512) == pytest.approx(1.3)
    assert capped.token_time_s(16, 9000) == pytest.approx(full.token_time_s(16, 9000))


def test_cap_factor_curves() -> None:
    assert prompt_cap_factor(1.0) == 1.0
    assert token_cap_factor(1.0) == 1.0
    assert prompt_cap_factor(0.7) == pytest.approx(1.3)
    assert token_cap_factor(0.5) == 1.0
    assert token_cap_factor(0.25) > 1.0
    caps = np.linspace(0.05, 1.0, 40)
    assert np.all(np.diff([prompt_cap_factor(c) for c in caps]) < 0)
    assert np.all(np.diff([token_cap_factor(c) for c in caps]) <= 0)


def test_moe_touches_experts_by_batch() -> None:
    mixtral = get_model("mixtral-8x7b")
    b = np.array([1.0, 2.0, 8.0, 64.0, 512.0])
    touched = _touched_weight_bytes(mixtral, b, mixtral.dtype_bytes)
    assert np.all(np.diff(touched) > 0)
    assert touched[0] == pytest.approx(mixtral.active_params * mixtral.dtype_bytes, rel=1e-9)
    assert touched[-1] <= mixtral.weight_bytes
    assert touched[-1] == pytest.approx(mixtral.weight_bytes, rel=1e-6)
    np.testing.assert_allclose(_touched_weight_bytes(LLAMA, b, LLAMA.dtype_bytes), LLAMA.weight_bytes)
    # fp8 weights: half the bytes of every weight read
    np.testing.assert_allclose(_touched_weight_bytes(mixtral, b, 1.0), touched / 2)
    # Linear-layer FLOPs use active parameters: a sparse model decodes faster than a dense one of
    # the same total size would.
    dense = dataclasses.replace(
        mixtral, name="dense", active_params=mixtral.params, experts=1, experts_per_token=1
    )
    c = AnalyticCoefficients()
    assert AnalyticPerfModel(mixtral, H100, c).token_time_s(1, 0) < AnalyticPerfModel(
        dense, H100, c
    ).token_time_s(1, 0)


def test_coefficient_validation_and_bad_files(tmp_path) -> None:
    with pytest.raises(InputError):
        AnalyticCoefficients(bw_eff=0.0)
    with pytest.raises(InputError):
        AnalyticCoefficients(token_overhead_s=-1.0)
    bad = tmp_path / "bad.toml"
    bad.write_text("[gpu.a100-80gb]\nbw_eff = 'fast'\n")
    with pytest.raises(InputError, match="bw_eff"):
        load_coefficients(bad)
    bad2 = tmp_path / "bad2.toml"
    bad2.write_text("[gpu.a100-80gb]\nwarp_speed = 9\n")
    with pytest.raises(InputError, match="warp_speed"):
        load_coefficients(bad2)
    with pytest.raises(InputError):
        load_coefficients(tmp_path / "missing.toml")


def test_per_model_refinement_overrides_gpu_coefficients(tmp_path) -> None:
    f = tmp_path / "c.toml"
    f.write_text(
        "[default]\nbw_eff = 0.5\n[gpu.a100-80gb]\ntoken_overhead_s = 0.03\n"
        '[gpu.a100-80gb.model."llama2-70b"]\ntoken_overhead_s = 0.01\n'
    )
    cs = load_coefficients(f)
    assert cs.lookup("a100-80gb", "llama2-70b").token_overhead_s == 0.01
    assert cs.lookup("a100-80gb", "bloom-176b").token_overhead_s == 0.03
    assert cs.lookup("h100-80gb", "llama2-70b").bw_eff == 0.5
    assert not cs.lookup("h100-80gb", "llama2-70b").calibrated
    assert AnalyticPerfModel(LLAMA, A100, cs).coefficients.token_overhead_s == 0.01
