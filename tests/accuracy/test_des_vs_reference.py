"""The DES against the reference simulator's results on the shared trace (compat assumptions)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from splitplan.catalog import get_model
from splitplan.design import ClusterConfig, get_design
from splitplan.sim.config import load_config
from splitplan.sim.des import simulate_des
from splitplan.sim.scenario import Scenario
from splitplan.slo import SLO_KEYS
from splitplan.workload import read_trace

pytestmark = pytest.mark.accuracy
COMPAT = Path(__file__).resolve().parents[2] / "examples" / "splitwise-sim-compat.toml"
DESIGNS = {"Baseline-H100": "baseline-h100", "Splitwise-HH": "splitwise-hh", "Splitwise-HA": "splitwise-ha"}


@pytest.fixture(scope="module")
def compat_scenario(reference_dir: Path, profile_csv: Path) -> Scenario:
    wl = read_trace(reference_dir / "traces" / "rr_code_70_2min.csv")
    return Scenario(
        workload=wl, model=get_model("llama2-70b"), perf=str(profile_csv), sim=load_config(COMPAT)
    )


def reference_cases(reference_dir: Path) -> list[dict[str, str]]:
    with open(reference_dir / "results.csv") as fh:
        return list(csv.DictReader(fh))


def config_for(row: dict[str, str]) -> ClusterConfig:
    design = get_design(DESIGNS[row["design"]])
    if design.is_baseline:
        return ClusterConfig.baseline(design, int(row["num_prompt"]))
    return ClusterConfig(
        design=design, prompt_machines=int(row["num_prompt"]), token_machines=int(row["num_token"])
    )


def test_every_reference_case_same_verdict_and_close_slowdowns(reference_dir, compat_scenario):
    rows = reference_cases(reference_dir)
    assert len(rows) >= 10
    medians = []
    for row in rows:
        res = simulate_des(config_for(row), compat_scenario)
        ref = np.array([float(row[f"{k.split('_')[0]}_slowdown_{k.split('_')[1]}"]) for k in SLO_KEYS])
        ours = np.array([res.slowdown[k] for k in SLO_KEYS])
        rel = np.abs(ours / ref - 1.0)
        assert res.meets_slo == (row["pass_all"] == "True"), row["run_name"]
        assert np.median(rel) <= 0.05, f"{row['run_name']}: median relative error {np.median(rel):.3f}"
        medians.append(np.median(rel))
    assert np.median(medians) <= 0.01


def test_per_request_latencies_match_on_a_split_case(reference_dir, compat_scenario):
    import gzip

    with gzip.open(reference_dir / "requests" / "swhh_code_20p10t.csv.gz", "rt") as fh:
        rows = list(csv.DictReader(fh))
    ids = np.array([int(float(r["request_ids"])) for r in rows])
    ref_ttft = np.array([float(r["ttft_times"]) for r in rows])
    cfg = ClusterConfig(design=get_design("splitwise-hh"), prompt_machines=20, token_machines=10)
    res = simulate_des(cfg, compat_scenario)
    ours = res.per_request.ttft_s[ids]
    assert np.median(np.abs(ours / ref_ttft - 1.0)) < 0.01
