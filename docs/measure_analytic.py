"""Agreement of the analytic evaluator with the discrete-event simulator (the table in background.md).

    python docs/measure_analytic.py

For each workload and design, evaluates a coarse grid over the default search ranges with both
evaluators (Llama2-70B, 70 req/s for 120 s, analytic performance model, seed 0) and prints the share
of points with the same all-nine-SLO verdict and the median relative error of the nine slowdowns
over the points either evaluator finds feasible. Takes about a minute on one core.
"""

from __future__ import annotations

import time

import numpy as np

from splitplan import api
from splitplan.sim.analytic import evaluate_grid
from splitplan.sim.des import simulate_des
from splitplan.slo import SLO_KEYS

GRIDS = {
    "splitwise-hh": (range(1, 41, 3), range(1, 41, 3)),
    "splitwise-aa": (range(1, 61, 4), range(1, 61, 4)),
    "baseline-h100": (range(1, 61, 2), (0,)),
}


def main() -> None:
    print(
        "| workload | design | points | same verdict | median error of the nine slowdowns | "
        "analytic ms/point | DES ms/point |"
    )
    print("|---|---|---|---|---|---|---|")
    for workload in ("coding", "conversation"):
        scenario = api.build_scenario(
            workload=api.WorkloadRequest(workload=workload, rate_rps=70.0, duration_s=120.0)
        )
        for name, (prompts, tokens) in GRIDS.items():
            design = api.get_design(name)
            pp, tt = np.array([(p, t) for p in prompts for t in tokens]).T
            t0 = time.perf_counter()
            batch = evaluate_grid(design, pp, tt, scenario)
            analytic_s = time.perf_counter() - t0
            agree, errors, des_s = 0, [], 0.0
            for i, (p, t) in enumerate(zip(pp, tt, strict=True)):
                cfg = (
                    api.ClusterConfig.baseline(design, int(p))
                    if design.is_baseline
                    else api.ClusterConfig(design=design, prompt_machines=int(p), token_machines=int(t))
                )
                res = simulate_des(cfg, scenario)
                des_s += res.sim_wall_s
                agree += bool(batch.meets_slo[i]) == res.meets_slo
                if res.meets_slo or batch.meets_slo[i]:
                    a = np.array([batch.slowdown[k][i] for k in SLO_KEYS])
                    d = np.array([res.slowdown[k] for k in SLO_KEYS])
                    errors.append(float(np.median(np.abs(a / d - 1.0))))
            n = len(pp)
            err = f"{np.median(errors):.1%}" if errors else "–"
            print(
                f"| {workload} | {name} | {n} | {agree / n:.1%} | {err} | {analytic_s / n * 1e3:.2f} | "
                f"{des_s / n * 1e3:.1f} |"
            )


if __name__ == "__main__":
    main()
