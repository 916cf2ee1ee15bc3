"""Per-case agreement of the DES with the reference simulator (the numbers in background.md).

    python docs/measure_reference.py

Runs the 17 reference cases (the shared coding trace, the reference profile and
examples/splitwise-sim-compat.toml) twice: with the compat setting prompt_interrupts_decodes =
"baseline" and with splitplan's default "always". Prints, per case, whether the all-nine-SLO verdicts
agree and the median relative error of the nine slowdown percentiles. Needs ../shared beside the
checkout (or SPLITPLAN_SHARED).
"""

from __future__ import annotations

import csv
import statistics
from pathlib import Path

import numpy as np

from splitplan import api
from splitplan.catalog import get_model
from splitplan.sim.config import load_config, shared_dir
from splitplan.sim.des import simulate_des
from splitplan.sim.scenario import Scenario
from splitplan.slo import SLO_KEYS
from splitplan.workload import read_trace

COMPAT = Path(__file__).resolve().parents[1] / "examples" / "splitwise-sim-compat.toml"
DESIGNS = {"Baseline-H100": "baseline-h100", "Splitwise-HH": "splitwise-hh", "Splitwise-HA": "splitwise-ha"}


def main() -> None:
    ref = shared_dir() / "reference" / "splitwise-sim"
    with open(ref / "results.csv") as fh:
        rows = list(csv.DictReader(fh))
    workload = read_trace(ref / "traces" / "rr_code_70_2min.csv")
    for mode in ("baseline", "always"):
        scenario = Scenario(
            workload=workload,
            model=get_model("llama2-70b"),
            perf=str(ref / "perf_model.csv"),
            sim=load_config(COMPAT, prompt_interrupts_decodes=mode),
        )
        print(f"prompt_interrupts_decodes = {mode!r}")
        errors, agree = [], 0
        for row in rows:
            design = api.get_design(DESIGNS[row["design"]])
            cfg = (
                api.ClusterConfig.baseline(design, int(row["num_prompt"]))
                if design.is_baseline
                else api.ClusterConfig(
                    design=design,
                    prompt_machines=int(row["num_prompt"]),
                    token_machines=int(row["num_token"]),
                )
            )
            res = simulate_des(cfg, scenario)
            theirs = np.array([float(row[f"{k.split('_')[0]}_slowdown_{k.split('_')[1]}"]) for k in SLO_KEYS])
            ours = np.array([res.slowdown[k] for k in SLO_KEYS])
            err = float(np.median(np.abs(ours / theirs - 1.0)))
            same = res.meets_slo == (row["pass_all"] == "True")
            errors.append(err)
            agree += same
            print(
                f"  {row['run_name']:18s} reference {'pass' if row['pass_all'] == 'True' else 'fail'}, "
                f"ours {'pass' if res.meets_slo else 'fail'}, median relative error {err:.2%}"
            )
        print(
            f"  verdicts agree on {agree} of {len(rows)}; median error {statistics.median(errors):.2%}, "
            f"worst {max(errors):.2%}"
        )


if __name__ == "__main__":
    main()
