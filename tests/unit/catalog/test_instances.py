"""Instances as the unit of a pool: a node's share of cost and power, precision-sized memory."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from splitplan.catalog import Machine, get_machine_type, get_model, list_machine_types
from splitplan.catalog.precision import Precision, parse_precision
from splitplan.errors import InputError
from splitplan.perf.memory import kv_capacity_bytes

NODES = [t.name for t in list_machine_types()]


def test_whole_node_fp16_is_the_papers_machine() -> None:
    node = get_machine_type("dgx-h100")
    m = Machine(type=node)
    assert m.tensor_parallel == 8
    assert m.cost_usd_per_h == node.cost_usd_per_h
    assert m.power_kw == node.rated_power_kw
    assert m.memory_bytes == node.memory_bytes
    assert m.name == "dgx-h100"
    assert Machine(type=node, tp=8) == m


@given(
    node=st.sampled_from(NODES),
    tp_index=st.integers(0, 3),
    cap=st.floats(0.3, 1.0),
    instances=st.integers(1, 10_000),
)
def test_cost_and_power_are_a_node_share_linear_in_instances(
    node: str, tp_index: int, cap: float, instances: int
) -> None:
    t = get_machine_type(node)
    tp = t.tp_choices[tp_index % len(t.tp_choices)]
    m = Machine(type=t, tp=tp, power_cap=cap)
    assert m.cost_usd_per_h * instances == pytest.approx(t.cost_usd_per_h * instances * tp / t.gpus)
    assert m.power_kw * instances == pytest.approx(t.gpu.tdp_w * tp * cap * instances / 1000)
    assert m.nodes_for(instances) == math.ceil(instances * tp / t.gpus)
    assert m.memory_bytes == t.gpu.memory_bytes * tp


def test_tp_must_tile_the_node() -> None:
    with pytest.raises(InputError, match="does not divide the 8 GPUs"):
        Machine(type=get_machine_type("dgx-a100"), tp=3)
    with pytest.raises(InputError, match="does not divide"):
        Machine(type=get_machine_type("dgx-a100"), tp=16)
    with pytest.raises(InputError, match="integer"):
        Machine(type=get_machine_type("dgx-a100"), tp=True)  # type: ignore[arg-type]


def test_fp8_needs_hardware_support() -> None:
    with pytest.raises(InputError, match="no fp8 support"):
        Machine(type=get_machine_type("dgx-a100"), kv_precision=Precision.FP8)
    m = Machine(type=get_machine_type("dgx-h100"), tp=2, weight_precision="fp8", kv_precision="fp8")
    assert m.weight_precision is Precision.FP8
    assert m.name == "dgx-h100/tp2/fp8"
    assert m.gpu.dense_flops(Precision.FP8) == 2 * m.gpu.dense_flops(Precision.FP16) + 1e12


def test_unknown_precision_names_the_choices() -> None:
    with pytest.raises(InputError, match="fp16, bf16, fp8, int4"):
        parse_precision("fp4")
    with pytest.raises(InputError, match="fp16, bf16, fp8,"):
        parse_precision("int4", kv=True)


def test_memory_is_sized_at_precision() -> None:
    llama = get_model("llama3.1-70b")
    h100 = get_machine_type("dgx-h100")
    # 141 GB of fp16 weights do not fit on one 80 GB GPU, nor 70 GB of fp8 with room for KV...
    with pytest.raises(InputError, match="does not fit"):
        kv_capacity_bytes(llama, Machine(type=h100, tp=1))
    # ...but fp8 on two GPUs does, with the fp16 weights' difference left for KV
    fp8 = Machine(type=h100, tp=2, weight_precision="fp8")
    assert kv_capacity_bytes(llama, fp8) == pytest.approx(fp8.memory_bytes - llama.params)
    assert llama.kv_bytes_per_token_at(Precision.FP8) == llama.kv_bytes_per_token / 2


def test_moe_and_mla_facts() -> None:
    ds = get_model("deepseek-v3")
    assert ds.is_sparse
    assert ds.expert_fraction == 8 / 256
    assert ds.kv_bytes_per_token == 61 * 576 * 2
    mixtral = get_model("mixtral-8x22b")
    assert mixtral.expert_fraction == 0.25
    # active = shared + routed × k/E
    shared = mixtral.params - mixtral.routed_expert_params
    assert shared + mixtral.routed_expert_params * 0.25 == pytest.approx(mixtral.active_params)
