"""Sweep the token pool's power cap of one Splitwise split; print provisioned power vs SLO headroom.

    python examples/power_cap_sweep.py

The token (decode) phase is memory-bound: lowering the cap saves provisioned power while latency
barely moves, until the cap gets so low that the GPUs' clocks limit even memory-bound work. One
split (6 prompt + 2 token DGX-H100) is simulated with the discrete-event simulator at each cap on the
same workload sample, so the differences come from the cap alone.
"""

from __future__ import annotations

from splitplan import api

CAPS = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3)


def main() -> None:
    scenario = api.build_scenario(
        workload=api.WorkloadRequest(workload="coding", rate_rps=20.0, duration_s=30.0), seed=0
    )
    print(
        f"{'token cap':>9s} {'power kW':>9s} {'meets SLO':>9s} {'binding':>9s} {'headroom':>9s} "
        f"{'TBT p90 s':>10s}"
    )
    lowest = None
    for cap in CAPS:
        design = api.custom_design("dgx-h100", "dgx-h100", token_power_cap=cap, name=f"hh-token@{cap:g}")
        config = api.ClusterConfig(design=design, prompt_machines=6, token_machines=2)
        result = api.simulate(config, scenario, engine="des")
        print(
            f"{cap:9.0%} {config.power_kw:9.2f} {result.meets_slo!s:>9s} {result.verdict.binding:>9s} "
            f"{result.verdict.headroom:+9.1%} {result.latency_s['tbt_p90']:10.4f}"
        )
        if result.meets_slo:
            lowest = (cap, config.power_kw)
    if lowest is not None:
        print(f"lowest cap meeting all nine SLOs: {lowest[0]:.0%} of rated power ({lowest[1]:.2f} kW)")


if __name__ == "__main__":
    main()
