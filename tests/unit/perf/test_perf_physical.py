"""The physical model: bounded terms, affinity in context, physical ordering, stacks, fitting."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from splitplan.catalog import Machine, get_machine_type, get_model
from splitplan.catalog.precision import Precision
from splitplan.errors import InputError
from splitplan.perf import PerfModel, get_perf_model, resolve_perf
from splitplan.perf.measurements import MEASUREMENT_COLUMNS, read_measurements, static_batch_time_s
from splitplan.perf.physical import EFFICIENCIES, STACK_BOUNDS, PhysicalPerfModel, StackParams
from splitplan.perf.profile import PROFILE_COLUMNS
from splitplan.perf.stackfit import FitOptions, consistent_rows, fit_params, fit_stack, score
from splitplan.perf.stacks import list_stacks, load_stack, save_stack

SHIPPED = ("datasheet", "kernels", "splitwise-sim", "tensorrt-llm")
MODELS = ("llama2-7b", "llama2-70b", "llama3-8b", "bloom-176b", "mixtral-8x7b")


def machine(
    node: str = "dgx-h100", tp: int = 8, prec: Precision = Precision.FP16, cap: float = 1.0
) -> Machine:
    return Machine(
        type=get_machine_type(node), tp=tp, weight_precision=prec, kv_precision=prec, power_cap=cap
    )


def model_for(stack: str, model: str, m: Machine) -> PhysicalPerfModel:
    pm = get_perf_model(stack, get_model(model), m)
    assert isinstance(pm, PhysicalPerfModel)
    return pm


def test_shipped_stacks_load_and_stay_within_physical_bounds() -> None:
    assert set(SHIPPED) <= set(list_stacks())
    for name in SHIPPED:
        stack = load_stack(name)
        for p in (stack.params, *stack.refine.values()):
            for k, (lo, hi) in STACK_BOUNDS.items():
                assert lo <= getattr(p, k) <= hi, (name, k)
            for k in EFFICIENCIES:
                assert 0.0 < getattr(p, k) <= 1.0, (name, k)
        assert stack.provenance.get("command"), name
        if stack.fitted:
            prov = stack.provenance
            assert len(str(prov["sha256"])) == 64, name
            assert int(prov["rows"]) > 0, name  # type: ignore[call-overload]
    assert not load_stack("datasheet").fitted


def test_bounds_reject_what_physics_forbids() -> None:
    assert all(STACK_BOUNDS[k][1] <= 1.0 and STACK_BOUNDS[k][0] > 0 for k in EFFICIENCIES)
    for k in EFFICIENCIES:
        with pytest.raises(InputError, match=k):
            StackParams(**{k: 1.2})
        with pytest.raises(InputError, match=k):
            StackParams(**{k: 0.0})
    with pytest.raises(InputError, match="iteration_overhead_s"):
        StackParams(iteration_overhead_s=-1e-3)
    with pytest.raises(InputError, match="allreduce_latency_scale"):
        StackParams(allreduce_latency_scale=0.01)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(SHIPPED),
    st.sampled_from(MODELS),
    st.sampled_from((1, 2, 4, 8)),
    st.floats(1.0, 1e6),
)
def test_compute_efficiency_is_a_fraction(stack: str, model: str, tp: int, tokens: float) -> None:
    eta = model_for(stack, model, machine(tp=tp)).compute_efficiency(tokens)
    assert 0.0 < float(eta) <= 1.0


@pytest.mark.parametrize("stack", SHIPPED)
def test_protocol_and_affine_in_context(stack: str) -> None:
    pm = model_for(stack, "llama2-70b", machine(tp=4))
    assert isinstance(pm, PerfModel)
    b = np.array([1.0, 8.0, 64.0, 512.0])
    f, g = pm.token_affine(b)
    ctx = np.array([0.0, 1e3, 1e5, 1e6])
    np.testing.assert_allclose(pm.token_time_s(b, ctx), f + g * ctx, rtol=1e-12)
    m0, m1 = pm.mixed_time_s(b, 0.0), pm.mixed_time_s(b, 1e5)
    np.testing.assert_allclose(pm.mixed_time_s(b, 2e5) - m1, m1 - m0, rtol=1e-9)
    np.testing.assert_allclose(pm.decode_alone_time_s(1000.0), pm.token_time_s(1.0, 1000.0))
    assert pm.prompt_time_s(np.ones((2, 3)) * 512).shape == (2, 3)


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from(SHIPPED),
    st.sampled_from(MODELS),
    st.sampled_from(("dgx-a100", "dgx-h100", "hgx-h200")),
    st.sampled_from((1, 2, 4)),
    st.floats(2048, 32768),
)
def test_more_gpus_never_slower_in_prefill_beyond_communication(
    stack: str, model: str, node: str, tp: int, tokens: float
) -> None:
    small = model_for(stack, model, machine(node, tp))
    big = model_for(stack, model, machine(node, 2 * tp))
    comm = big.allreduce_time_s(tokens)
    assert big.prompt_time_s(tokens) - comm <= small.prompt_time_s(tokens) * (1 + 1e-9)


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from(SHIPPED),
    st.sampled_from(MODELS),
    st.sampled_from(("dgx-h100", "hgx-h200", "hgx-b200")),
    st.sampled_from((1, 2, 4, 8)),
    st.floats(1, 4096),
    st.floats(0, 2e6),
)
def test_fp8_never_slower_than_fp16(stack: str, model: str, node: str, tp: int, n: float, ctx: float) -> None:
    a = model_for(stack, model, machine(node, tp, Precision.FP16))
    b = model_for(stack, model, machine(node, tp, Precision.FP8))
    assert b.prompt_time_s(n) <= a.prompt_time_s(n)
    assert b.token_time_s(n, ctx) <= a.token_time_s(n, ctx)
    assert b.mixed_time_s(n, ctx) <= a.mixed_time_s(n, ctx)


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from(SHIPPED),
    st.sampled_from(MODELS),
    st.sampled_from(("dgx-a100", "dgx-h100", "hgx-h200")),
    st.sampled_from((1, 2, 4, 8)),
    st.floats(1, 1024),
    st.floats(0, 1e6),
    st.floats(0, 100),
    st.floats(0, 1e5),
)
def test_decode_non_decreasing_in_batch_and_context(
    stack: str, model: str, node: str, tp: int, b: float, ctx: float, db: float, dctx: float
) -> None:
    pm = model_for(stack, model, machine(node, tp))
    t = pm.token_time_s(b, ctx)
    assert pm.token_time_s(b + db, ctx) >= t * (1 - 1e-12)
    assert pm.token_time_s(b, ctx + dctx) >= t * (1 - 1e-12)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(SHIPPED),
    st.sampled_from(MODELS),
    st.sampled_from((1, 2, 4, 8)),
    st.floats(1, 64),
    st.floats(0, 1e6),
)
def test_h200_no_slower_than_h100_in_memory_bound_decode(
    stack: str, model: str, tp: int, b: float, ctx: float
) -> None:
    h100 = model_for(stack, model, machine("dgx-h100", tp))
    h200 = model_for(stack, model, machine("hgx-h200", tp))
    assert h200.token_time_s(b, ctx) <= h100.token_time_s(b, ctx)


def test_power_cap_slows_prefill_not_decode_above_knee() -> None:
    full = model_for("kernels", "llama2-70b", machine(cap=1.0))
    capped = model_for("kernels", "llama2-70b", machine(cap=0.7))
    assert capped.prompt_time_s(2048) == pytest.approx(full.prompt_time_s(2048) * 1.3, rel=1e-9)
    assert capped.token_time_s(64, 1e5) == pytest.approx(full.token_time_s(64, 1e5))


def test_tp1_has_no_all_reduce_and_tp8_has_two_per_layer() -> None:
    one = model_for("datasheet", "llama2-7b", machine(tp=1))
    assert one.allreduce_time_s(1000.0) == 0.0
    eight = model_for("datasheet", "llama2-70b", machine(tp=8))
    m = get_model("llama2-70b")
    node = get_machine_type("dgx-h100")
    p = StackParams()
    want = (
        2
        * m.layers
        * (
            node.intra_node_latency_s * p.allreduce_latency_scale
            + 2 * 7 / 8 * 1000 * m.hidden * 2 / (node.intra_node_bytes_per_s * p.link_bw_eff)
        )
    )
    assert eight.allreduce_time_s(1000.0) == pytest.approx(want)


def test_large_prefill_knee_is_in_the_all_reduce_at_one_per_gpu_shard_size() -> None:
    """The knee slows the all-reduce, not the GEMMs, and sets in at one per-GPU shard size (tokens
    × hidden / TP): TP2 at n tokens is as far past it as TP8 at 4n. Without a knee, none."""
    p = load_stack("splitwise-sim").params_for("a100-80gb", "llama2-70b")
    assert p.knee_gain > 0
    tp2 = PhysicalPerfModel(get_model("llama2-70b"), machine("dgx-a100", 2), p)
    tp8 = PhysicalPerfModel(get_model("llama2-70b"), machine("dgx-a100", 8), p)
    n = np.array([256.0, 1024.0, 4096.0, 16384.0])
    np.testing.assert_allclose(tp2.link_slowdown(n), tp8.link_slowdown(4 * n), rtol=1e-12)
    slow = tp8.link_slowdown(np.geomspace(1, 1e6, 50))
    assert np.all(np.diff(slow) >= 0)
    assert slow[0] >= 1.0
    assert slow[-1] <= 1.0 + p.knee_gain
    assert 0.0 < p.link_bw_eff / slow[-1] <= 1.0  # the achieved link fraction stays a fraction
    no_knee = dataclasses.replace(p, knee_gain=0.0)
    flat = PhysicalPerfModel(get_model("llama2-70b"), machine("dgx-a100", 8), no_knee)
    np.testing.assert_allclose(flat.compute_efficiency(n), tp8.compute_efficiency(n), rtol=1e-12)
    assert np.all(tp8.allreduce_time_s(n) > flat.allreduce_time_s(n))
    np.testing.assert_allclose(flat.link_slowdown(n), 1.0)


def test_static_batch_closed_form_equals_the_sum_of_iterations() -> None:
    pm = model_for("tensorrt-llm", "llama2-70b", machine(tp=4))
    b, p, out = np.array([64.0, 8.0]), np.array([128.0, 2048.0]), np.array([128.0, 5.0])
    got = static_batch_time_s(pm, b, p, out)
    for i in range(2):
        j = np.arange(1, out[i])
        want = pm.prompt_time_s(b[i] * p[i], b[i]) + np.sum(pm.token_time_s(b[i], b[i] * (p[i] + j)))
        assert got[i] == pytest.approx(float(want), rel=1e-12)


# the measurement schema's columns (the reader's own list) and its three optional ones
MEAS_HEADER = ",".join((*MEASUREMENT_COLUMNS, "estimated", "derivation", "notes")) + "\n"


def synthetic_measurements(tmp_path, true: StackParams, noise: float = 0.0):
    rng = np.random.default_rng(0)
    lines = [MEAS_HEADER]
    for model, gpu, tp, prec in (
        ("llama2-70b", "a100-80gb", 4, "fp16"),
        ("llama2-70b", "h100-80gb", 8, "fp8"),
        ("llama2-7b", "a100-80gb", 1, "fp16"),
        ("llama2-7b", "h100-80gb", 2, "fp16"),
    ):
        from splitplan.perf.measurements import machine_for_group

        pm = PhysicalPerfModel(get_model(model), machine_for_group(gpu, tp, prec), true)
        for p in (128, 512, 2048, 4096):
            t = float(pm.prompt_time_s(p)) * 1e3 * (1 + noise * rng.standard_normal())
            lines.append(f"syn,{model},{gpu},{tp},{prec},prompt,1,{p},,,{t},no,,\n")
        for b in (1, 8, 64, 256):
            ctx = b * 1000
            t = float(pm.token_time_s(b, ctx)) * 1e3 * (1 + noise * rng.standard_normal())
            lines.append(f"syn,{model},{gpu},{tp},{prec},token,{b},,{ctx},,{t},no,,\n")
        for b, p, o in ((64, 128, 128), (16, 2048, 256)):
            t = float(static_batch_time_s(pm, np.array([b]), np.array([p]), np.array([o]))[0]) * 1e3
            lines.append(f"syn,{model},{gpu},{tp},{prec},static_batch,{b},{p},,{o},{t},no,,\n")
    f = tmp_path / "syn.csv"
    f.write_text("".join(lines))
    return f


TRUE = StackParams(
    compute_eff=0.6,
    gemm_half_elements=2e5,
    attention_eff=0.3,
    weight_bw_eff=0.75,
    kv_bw_eff=0.5,
    link_bw_eff=0.6,
    allreduce_latency_scale=2.0,
    iteration_overhead_s=3e-3,
    layer_overhead_s=4e-5,
)


def test_fit_recovers_a_known_stack_and_writes_findable_provenance(tmp_path, monkeypatch) -> None:
    f = synthetic_measurements(tmp_path, TRUE, noise=0.01)
    stack = fit_stack(str(f), "mystack", FitOptions(), date="2000-01-01", command="cmd")
    errs = score(stack.params, read_measurements(str(f)))
    assert max(e.mape for e in errs) < 3.0
    out = save_stack(stack, tmp_path / "cat")
    assert out == tmp_path / "cat" / "perf" / "mystack.toml"
    text = out.read_text()
    import hashlib

    assert hashlib.sha256(f.read_bytes()).hexdigest() in text
    assert "2000-01-01" in text
    assert str(f) in text
    assert "rows = 40" in text
    monkeypatch.setenv("SPLITPLAN_CATALOG", str(tmp_path / "cat"))
    assert "mystack" in list_stacks()
    kind, s = resolve_perf("mystack")
    assert kind == "stack"
    got, want = s.params.to_dict(), stack.params.to_dict()  # type: ignore[attr-defined]
    assert got == pytest.approx(want, rel=1e-5)


def test_fitted_terms_stay_within_bounds_even_when_data_pull_outside(tmp_path) -> None:
    """Times faster than the datasheet allows: the fit pins efficiencies at 1, never above."""
    fast = dataclasses.replace(TRUE, compute_eff=1.0, weight_bw_eff=1.0, kv_bw_eff=1.0)
    f = synthetic_measurements(tmp_path, fast)
    rows = read_measurements(str(f))
    rows = dataclasses.replace(rows, measured_s=rows.measured_s * 0.5)
    p = fit_params(rows)
    for k, (lo, hi) in STACK_BOUNDS.items():
        assert lo <= getattr(p, k) <= hi
    assert p.weight_bw_eff <= 1.0
    assert p.compute_eff <= 1.0


def test_resolve_perf_names_and_paths(tmp_path) -> None:
    assert resolve_perf("analytic") == ("analytic", None)
    assert resolve_perf("kernels")[0] == "stack"
    with pytest.raises(InputError, match="unknown performance stack 'nope'"):
        resolve_perf("nope")
    with pytest.raises(InputError, match="does not exist"):
        resolve_perf(tmp_path / "missing.csv")
    f = synthetic_measurements(tmp_path, TRUE)
    kind, _ = resolve_perf(f)
    assert kind == "stack"
    assert get_perf_model(str(f), get_model("llama2-70b"), machine(tp=4)).kind == "physical"


def test_measurement_reader_rejects_bad_rows(tmp_path) -> None:
    f = tmp_path / "bad.csv"
    f.write_text(MEAS_HEADER + "s,llama2-7b,a100-80gb,1,fp16,decode,1,120,,,5,no,,\n")
    with pytest.raises(InputError, match="phase"):
        read_measurements(str(f))
    f.write_text(MEAS_HEADER + "s,llama2-7b,a100-80gb,1,fp16,static_batch,1,120,,,5,no,,\n")
    with pytest.raises(InputError, match="output_tokens"):
        read_measurements(str(f))
    f.write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="neither a profile table nor a measurement table"):
        read_measurements(str(f))


def test_profile_schema_rows_and_contradicting_rows(tmp_path) -> None:
    f = tmp_path / "p.csv"
    head = ",".join(PROFILE_COLUMNS) + "\n"
    body = [
        "llama2-70b,a100-80gb,500,1,120,100,40,2\n",
        "llama2-70b,a100-80gb,500,2,120,200,41,2\n",
        "llama2-70b,a100-80gb,500,4,120,50,42,2\n",  # faster than 2 prompts: a truncated run
    ]
    f.write_text(head + "".join(body))
    rows = read_measurements(str(f))
    assert rows.schema == "profile"
    assert len(rows) == 6
    assert sorted(set(rows.phase.tolist())) == ["prompt", "token"]
    np.testing.assert_allclose(
        rows.context_tokens[rows.phase == "token"], [560, 1120, 2240]
    )  # batch × (500 + 120 / 2)
    ok = consistent_rows(rows)
    assert ok.sum() == 4
    assert not ok[2]
    assert not ok[5]
