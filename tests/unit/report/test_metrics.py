"""Served-token metrics: hand-computed values, GPUs counted per instance, None without a rate, and
the same numbers in simulate's and search's JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "search"))
from search_fakes import FakeEvaluator

import splitplan.api._search as api_search
from splitplan.catalog import Machine, get_machine_type
from splitplan.cli import main
from splitplan.design import ClusterConfig, Design, get_design
from splitplan.report.metrics import METRIC_KEYS, config_metrics, gpus_of, metrics_line, served_metrics
from splitplan.workload.base import Workload


def test_hand_computed_values():
    m = served_metrics(
        rate_rps=10.0, mean_prompt_tokens=900.0, mean_output_tokens=100.0, cost_usd_per_h=36.0,
        power_kw=5.0, gpus=8,
    )  # fmt: skip
    assert m["tokens_per_s"] == pytest.approx(10_000.0)
    assert m["output_tokens_per_s"] == pytest.approx(1_000.0)
    assert m["output_tokens_per_s_per_gpu"] == pytest.approx(125.0)
    # $36/h over 36 M tokens/h → $1/M; over 3.6 M generated tokens/h → $10/M
    assert m["usd_per_million_tokens"] == pytest.approx(1.0)
    assert m["usd_per_million_output_tokens"] == pytest.approx(10.0)
    assert m["energy_j_per_request"] == pytest.approx(500.0)  # 5 kW ÷ 10 req/s
    assert len(metrics_line(m)) < 78


@pytest.mark.parametrize("rate", [None, 0.0, float("nan"), float("inf")])
def test_no_rate_no_metrics(rate):
    m = served_metrics(
        rate_rps=rate, mean_prompt_tokens=1, mean_output_tokens=1, cost_usd_per_h=1, power_kw=1, gpus=1
    )
    assert m == dict.fromkeys(METRIC_KEYS)
    assert "no served-token metrics" in metrics_line(m)


def test_gpus_count_instances_times_tp():
    node = get_machine_type("dgx-h100")
    d = Design(name="x", kind="splitwise", prompt=Machine(type=node, tp=2), token=Machine(type=node, tp=4))
    assert gpus_of(ClusterConfig(design=d, prompt_machines=3, token_machines=5)) == 3 * 2 + 5 * 4
    assert gpus_of(ClusterConfig.baseline(get_design("baseline-a100"), 7)) == 56
    wl = Workload(arrival_s=np.arange(4.0), prompt_tokens=[10, 20, 30, 40], output_tokens=[1, 2, 3, 6])
    m = config_metrics(ClusterConfig.baseline(get_design("baseline-a100"), 7), wl, 2.0)
    assert m["tokens_per_s"] == pytest.approx(2.0 * (25 + 3))
    assert m["output_tokens_per_s_per_gpu"] == pytest.approx(2.0 * 3 / 56)


def test_simulate_and_search_json_carry_metrics(capsys, monkeypatch):
    args = ["simulate", "--design", "splitwise-hh", "--prompt", "3", "--token", "2", "--rate", "5"]
    assert main([*args, "--duration", "20", "--engine", "analytic", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc["metrics"]) == set(METRIC_KEYS)
    assert doc["metrics"]["energy_j_per_request"] == pytest.approx(
        doc["power_kw"] * 1000 / doc["throughput_rps"], rel=1e-5
    )
    monkeypatch.setattr(api_search, "SimEvaluator", lambda _s: FakeEvaluator())
    args = ["search", "--design", "splitwise-hh", "--design", "baseline-h100", "--duration", "10"]
    assert main([*args, "--prompt-range", "10:16", "--token-range", "3:6", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for r in doc["results"]:
        if r["meets_slo"]:
            assert r["metrics"]["usd_per_million_tokens"] > 0
            assert r["metrics"]["energy_j_per_request"] == pytest.approx(
                r["power_kw"] * 1000 / r["rate_rps"], rel=1e-5
            )
        else:
            assert r["metrics"] is None
    assert doc["best"]["metrics"] == next(
        r["metrics"] for r in doc["results"] if r["design"] == doc["best"]["design"]
    )
