"""Optuna path: when every analytic candidate fails in the DES, the search climbs to a passing one."""

from __future__ import annotations

from splitplan.api import SearchRequest, WorkloadRequest, search
from splitplan.api._simulate import make_config, resolve_design
from splitplan.sim.des import simulate_des


def test_optimistic_screen_still_yields_a_des_verified_answer():
    req = SearchRequest(
        prompt_gpus=("h100-80gb",), token_gpus=("a100-80gb",), token_power_cap="0.5:1.0",
        prompt_range="1:10", token_range="1:10",
        workload=WorkloadRequest(workload="coding", rate_rps=20, duration_s=30), seed=0,
    )
    res = search(req).results[0]
    assert res.meets_slo
    assert res.verified_by == "des"
    # the answer really passes in the DES
    from splitplan.api import build_scenario

    design = resolve_design(None, prompt_gpu="h100-80gb", token_gpu="a100-80gb",
                            token_power_cap=res.token_power_cap)
    cfg = make_config(design, res.prompt_machines, res.token_machines, None)
    assert simulate_des(cfg, build_scenario(workload=req.workload, seed=0)).meets_slo
