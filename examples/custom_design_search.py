"""Search a custom design: an H100 prompt pool feeding a power-capped A100 token pool.

    python examples/custom_design_search.py

The paper's designs are fixed pairs of machine types; here the prompt pool uses DGX-H100 machines
at full power and the token pool DGX-A100 machines capped at 70 % of rated power. Decode is
memory-bound, so the cap barely slows pure decode iterations; but prompts that overflow into the
token pool (the mixed pool) run compute-bound at the capped clocks. Whether the cap pays off
therefore depends on the workload: the search finds the split with the least provisioned power
meeting all nine SLOs and prints it beside the paper's uncapped Splitwise-HA design.
"""

from __future__ import annotations

from splitplan import api


def main() -> None:
    workload = api.WorkloadRequest(workload="coding", rate_rps=20.0, duration_s=30.0)
    custom = api.SearchRequest(
        prompt_gpus=("h100-80gb",),  # a GPU name picks its 8-GPU machine (dgx-h100)
        token_gpus=("a100-80gb",),
        token_power_cap=0.7,  # a (lo, hi) pair would make the cap a search dimension too
        designs=("splitwise-ha",),  # the uncapped paper design, for comparison
        prompt_range=(1, 10),
        token_range=(1, 10),
        workload=workload,
        objective="power",
    )
    outcome = api.search(custom)
    print(f"{'design':30s} {'split':>9s} {'$/h':>8s} {'kW':>7s} {'binding SLO':>12s} {'headroom':>9s}")
    for r in outcome.results:
        if not r.meets_slo:
            print(f"{r.design:30s} no configuration in range meets the SLOs")
            continue
        split = f"{r.prompt_machines}P+{r.token_machines}T"
        print(
            f"{r.design:30s} {split:>9s} {r.cost_usd_per_h:8.2f} {r.power_kw:7.2f} "
            f"{r.binding_slo:>12s} {r.headroom:+9.1%}"
        )
    best = outcome.best
    if best is not None:
        print(
            f"least power: {best.design} ({best.prompt_gpu} prompt pool, {best.token_gpu} token pool "
            f"at {best.token_power_cap:.0%} power), verified by {best.verified_by}; "
            f"{outcome.evaluated_points} points, {outcome.des_evaluations} DES runs, "
            f"{outcome.wall_s:.1f} s"
        )


if __name__ == "__main__":
    main()
