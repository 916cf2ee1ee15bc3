"""Deployment plans: the YAML emitter round-trips through a real YAML parser, every plan validates
against PLAN_SCHEMA, pools say what to provision, and the how-to documents every field."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "search"))
from search_fakes import FakeEvaluator

from splitplan import api
from splitplan.api._plan import check_plan_path, export_plan, search_plan, simulation_plan
from splitplan.catalog import Machine, get_machine_type
from splitplan.design import ClusterConfig, Design, get_design
from splitplan.errors import InfeasibleError, InputError
from splitplan.report.plan import PLAN_SCHEMA, deployment_plan, to_yaml
from splitplan.slo import SLO_KEYS

yaml = pytest.importorskip("yaml")
jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parents[3]
HOWTO = ROOT / "docs" / "howto" / "export-a-deployment-plan.md"


@pytest.fixture(scope="module")
def scenario():
    return api.build_scenario(workload=api.WorkloadRequest(rate_rps=5.0, duration_s=20.0), seed=3)


def _roundtrip(doc: dict) -> dict:
    parsed = yaml.safe_load(to_yaml(doc, "a header\nline two"))
    jsonschema.validate(parsed, PLAN_SCHEMA)
    return parsed


def test_yaml_emitter_round_trips_awkward_scalars():
    doc = {
        "yes": "no",
        "on": ["off", "null", "~", "1.0", "0x10", "a: b", "#x", " lead", "ünïcode", "", "-", "a\nb"],
        "numbers": [0, -3, 1.0, 1e-05, 1e20, -2.5e-300, 0.1, 12345678901234567890],
        "flags": [True, False, None],
        "nan": float("nan"),
        "empty": {"m": {}, "l": []},
        "nested": [{"a": 1, "b": [{"c": "d"}, 2]}, {"e": {"f": "g"}}],
        "key with space": "v",
    }
    parsed = yaml.safe_load(to_yaml(doc))
    expected = dict(doc, nan=None)
    assert parsed == expected


def test_simulation_plan_validates_and_matches_the_result(scenario):
    cfg = ClusterConfig(design=get_design("splitwise-hh"), prompt_machines=3, token_machines=2)
    result = api.simulate(cfg, scenario, "analytic")
    plan = _roundtrip(simulation_plan(result, scenario))
    assert plan["source"] == {
        "command": "simulate",
        "engine": "analytic",
        "verified_by": "analytic",
        "objective": None,
    }
    assert [p["role"] for p in plan["pools"]] == ["prompt", "token"]
    prompt, token = plan["pools"]
    assert (prompt["instances"], prompt["tensor_parallel"], prompt["nodes"], prompt["gpus"]) == (3, 8, 3, 24)
    assert (token["instances"], token["node_type"], token["gpu"]) == (2, "dgx-h100", "h100-80gb")
    assert prompt["gpu_power_limit_w"] == pytest.approx(700.0)
    assert plan["predicted"]["meets_slo"] == result.meets_slo
    assert plan["predicted"]["cost_usd_per_h"] == pytest.approx(cfg.cost_usd_per_h)
    assert plan["predicted"]["latency_s"]["ttft_p99"] == pytest.approx(result.latency_s["ttft_p99"], rel=1e-5)
    assert plan["workload"]["rate_rps"] == pytest.approx(5.0)
    assert plan["workload"]["requests"] == scenario.workload.n
    assert plan["slo"]["slowdown"] == {k: scenario.slo.slowdown[k] for k in SLO_KEYS}
    assert plan["routing"]["policy"] == "splitwise"
    assert plan["batching"]["max_batch_tokens"] == scenario.sim.max_batch_tokens


def test_instances_of_part_of_a_node_pack_nodes(scenario):
    node = get_machine_type("dgx-h100")
    prompt = Machine(type=node, tp=2, weight_precision="fp8", kv_precision="fp8", power_cap=0.8)
    token = Machine(type=node, tp=4)
    design = Design(name="tp-mix", kind="splitwise", prompt=prompt, token=token)
    cfg = ClusterConfig(design=design, prompt_machines=5, token_machines=3)
    plan = _roundtrip(
        deployment_plan(
            cfg,
            scenario,
            command="simulate",
            engine="des",
            objective=None,
            meets_slo=True,
            binding_slo="tbt_p50",
            headroom=0.1,
            rate_rps=5.0,
            slowdown=dict.fromkeys(SLO_KEYS, 1.0),
        )
    )
    p, t = plan["pools"]
    assert (p["tensor_parallel"], p["instances_per_node"], p["nodes"], p["gpus"]) == (2, 4, 2, 10)
    assert (p["weight_precision"], p["kv_precision"], p["power_cap"]) == ("fp8", "fp8", 0.8)
    assert p["gpu_power_limit_w"] == pytest.approx(560.0)
    assert (t["tensor_parallel"], t["instances_per_node"], t["nodes"], t["gpus"]) == (4, 2, 2, 12)
    assert p["cost_usd_per_h"] == pytest.approx(5 * prompt.cost_usd_per_h, rel=1e-6)


def test_baseline_plan_has_one_mixed_pool(scenario):
    cfg = ClusterConfig.baseline(get_design("baseline-a100"), 4)
    result = api.simulate(cfg, scenario, "analytic")
    plan = _roundtrip(simulation_plan(result, scenario))
    assert [p["role"] for p in plan["pools"]] == ["mixed"]
    assert plan["pools"][0]["instances"] == 4
    assert plan["routing"]["policy"] == "join-shortest-queue"
    assert plan["routing"]["kv_transfer"] is None


def _search(designs: tuple[str, ...], prompt_need: float = 26.5):
    req = api.SearchRequest(
        designs=designs,
        prompt_range=(10, 16),
        token_range=(3, 6),
        workload=api.WorkloadRequest(duration_s=10.0),
    )
    return req, api.search(req, evaluator=FakeEvaluator(prompt_need=prompt_need))


def test_search_plan_is_the_winner():
    req, outcome = _search(("splitwise-hh", "baseline-h100"))
    best = outcome.best
    assert best is not None
    plan = _roundtrip(search_plan(req, outcome))
    assert plan["design"]["name"] == best.design
    assert plan["source"]["command"] == "search"
    assert plan["source"]["objective"] == "cost"
    assert plan["source"]["verified_by"] == best.verified_by
    assert plan["predicted"]["cost_usd_per_h"] == pytest.approx(best.cost_usd_per_h)
    if best.baseline:
        assert plan["pools"][0]["instances"] == best.machines
    else:
        assert [p["instances"] for p in plan["pools"]] == [best.prompt_machines, best.token_machines]
    assert all(v is None for v in plan["predicted"]["latency_s"].values())


def test_search_plan_and_metrics_describe_the_winners_own_instances():
    """A search over TP choices whose winner is not the first choice: the plan and the served-token
    metrics are of the winner's instances and their counts (they had been rebuilt from the pools'
    first choice and the node counts, a plan of another cluster)."""
    req = api.SearchRequest(
        prompt_gpus=("h100",),
        token_gpus=("h100",),
        prompt_tp=(8, 4, 2),
        token_tp=(8, 4, 2),
        prompt_range=(1, 16),
        token_range=(1, 6),
        workload=api.WorkloadRequest(duration_s=10.0),
    )
    outcome = api.search(req, evaluator=FakeEvaluator())  # its capacity is per instance, any TP
    best = outcome.best
    assert best is not None
    assert (best.prompt_tp, best.token_tp) != (8, 8)
    assert best.prompt_instances != best.prompt_machines or best.token_instances != best.token_machines
    plan = _roundtrip(search_plan(req, outcome))
    pools = plan["pools"]
    assert [p["tensor_parallel"] for p in pools] == [best.prompt_tp, best.token_tp]
    assert [p["instances"] for p in pools] == [best.prompt_instances, best.token_instances]
    assert [p["nodes"] for p in pools] == [best.prompt_machines, best.token_machines]
    assert plan["predicted"]["cost_usd_per_h"] == pytest.approx(best.cost_usd_per_h)
    gpus = best.prompt_instances * best.prompt_tp + best.token_instances * best.token_tp
    metrics = api.search_metrics(req, outcome)[best.design]
    assert metrics is not None
    assert metrics["output_tokens_per_s_per_gpu"] == pytest.approx(
        metrics["output_tokens_per_s"] / gpus, rel=1e-3
    )


def test_search_plan_refuses_without_an_answer():
    req, outcome = _search(("splitwise-hh",), prompt_need=1e6)
    assert outcome.best is None
    with pytest.raises(InfeasibleError, match="no deployment plan"):
        search_plan(req, outcome)
    with pytest.raises(InputError, match="was not searched"):
        search_plan(req, outcome, design="splitwise-aa")


def test_plan_paths_are_checked_before_work(tmp_path):
    with pytest.raises(InputError, match=r"\.yaml or \.yml"):
        check_plan_path(tmp_path / "plan.json")
    with pytest.raises(InputError, match="does not exist"):
        check_plan_path(tmp_path / "missing" / "plan.yaml")
    check_plan_path(tmp_path / "plan.yml")


def test_export_writes_the_file_atomically(tmp_path, scenario):
    cfg = ClusterConfig(design=get_design("splitwise-ha"), prompt_machines=2, token_machines=2)
    doc = simulation_plan(api.simulate(cfg, scenario, "analytic"), scenario)
    path = export_plan(doc, tmp_path / "plan.yaml")
    text = path.read_text()
    assert text.startswith("# splitplan ")
    assert yaml.safe_load(text) == yaml.safe_load(to_yaml(doc))
    assert [p.name for p in tmp_path.iterdir()] == ["plan.yaml"]


def _schema_fields(schema: dict, prefix: str = "") -> set[str]:
    out: set[str] = set()
    props = schema.get("properties") or schema.get("items", {}).get("properties") or {}
    is_list = "items" in schema
    for name, sub in props.items():
        path = f"{prefix}{'[]' if is_list else ''}.{name}" if prefix else name
        leaf = name in ("prompt_tokens", "output_tokens", "slowdown", "latency_s")
        inner = set() if leaf else _schema_fields(sub, path)
        out |= inner or {path}  # leaves: a section is documented through its fields
    return out


def test_howto_documents_every_plan_field():
    text = HOWTO.read_text()
    documented = set(re.findall(r"`([a-z_]+(?:\[\])?(?:\.[a-z_0-9]+)*)`", text))
    missing = sorted(f for f in _schema_fields(PLAN_SCHEMA) if f not in documented)
    assert not missing, f"{HOWTO.name} does not document {missing}"
    for engine_flag in ("--tensor-parallel-size", "--disaggregation-mode", "--tp-size", "nvidia-smi"):
        assert engine_flag in text
