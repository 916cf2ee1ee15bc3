"""DES speed: requests simulated per second and wall time per configuration, against the reference.

    python tests/benchmarks/bench_des.py [--repeat 5]

Reads ../shared/reference/splitwise-sim (trace, profile, results.csv with the reference's wall time
per case on one core) and prints, per case, the median `sim_wall_s` over the repeats and the ratio
reference_wall / ours, and the median CPU time of the thread that ran the kernel (`extra["sim_cpu_s"]`:
on a shared machine the steadier figure). A conversation-style workload (long decodes) is timed too.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[2]))

from splitplan.catalog import get_model  # noqa: E402
from splitplan.design import ClusterConfig, get_design  # noqa: E402
from splitplan.sim.config import load_config, shared_dir  # noqa: E402
from splitplan.sim.des import simulate_des  # noqa: E402
from splitplan.sim.scenario import Scenario  # noqa: E402
from splitplan.workload import make_workload, read_trace  # noqa: E402

DESIGNS = {"Baseline-H100": "baseline-h100", "Splitwise-HH": "splitwise-hh", "Splitwise-HA": "splitwise-ha"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    ref = shared_dir() / "reference" / "splitwise-sim"
    compat = HERE.parents[2] / "examples" / "splitwise-sim-compat.toml"
    wl = read_trace(ref / "traces" / "rr_code_70_2min.csv")
    sc = Scenario(
        workload=wl, model=get_model("llama2-70b"), perf=str(ref / "perf_model.csv"), sim=load_config(compat)
    )
    ratios = []
    print(f"{'case':18s} {'ours ms':>8s} {'cpu ms':>8s} {'req/s':>10s} {'ref s':>7s} {'ratio':>8s}")
    with open(ref / "results.csv") as fh:
        for row in csv.DictReader(fh):
            d = get_design(DESIGNS[row["design"]])
            cfg = (
                ClusterConfig.baseline(d, int(row["num_prompt"]))
                if d.is_baseline
                else ClusterConfig(
                    design=d, prompt_machines=int(row["num_prompt"]), token_machines=int(row["num_token"])
                )
            )
            runs = [simulate_des(cfg, sc) for _ in range(args.repeat)]
            ours = statistics.median(r.sim_wall_s for r in runs)
            cpu = statistics.median(r.extra["sim_cpu_s"] for r in runs)
            ratio = float(row["wall_s"]) / ours
            ratios.append(ratio)
            print(
                f"{row['run_name']:18s} {ours * 1000:8.1f} {cpu * 1000:8.1f} {wl.n / ours:10.0f} "
                f"{float(row['wall_s']):7.2f} {ratio:8.0f}x"
            )
    print(f"median speed-up vs the reference: {statistics.median(ratios):.0f}x (min {min(ratios):.0f}x)")
    conv = make_workload("conversation", rate_rps=70, duration_s=120, seed=0)
    sc2 = Scenario(
        workload=conv,
        model=get_model("llama2-70b"),
        perf=str(ref / "perf_model.csv"),
        sim=load_config(compat),
    )
    for cfg in (
        ClusterConfig(design=get_design("splitwise-hh"), prompt_machines=25, token_machines=15),
        ClusterConfig.baseline(get_design("baseline-h100"), 40),
    ):
        runs = [simulate_des(cfg, sc2) for _ in range(args.repeat)]
        ours = statistics.median(r.sim_wall_s for r in runs)
        cpu = statistics.median(r.extra["sim_cpu_s"] for r in runs)
        print(
            f"conversation {cfg.label:28s} {ours * 1000:8.1f} ms  cpu {cpu * 1000:8.1f} ms  "
            f"{conv.n / ours:10.0f} req/s"
        )


if __name__ == "__main__":
    main()
