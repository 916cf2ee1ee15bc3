"""Regenerate tests/golden/search_exhaustive.json: exhaustive DES sweeps of the 39 × 39 grid.

    python tests/golden/regen_search.py [--jobs N]

Each case records the optimum an exhaustive DES sweep finds and the set of feasible points, so
tests/unit/search/test_golden.py can check that the hybrid engine returns the same optimum. Rerun
after any change to the DES, the performance model or the default workload presets.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from splitplan.api import SearchRequest, WorkloadRequest, search

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "search_exhaustive.json"
CASES = [
    (design, preset) for preset in ("coding", "conversation") for design in ("splitwise-hh", "splitwise-aa")
]
RATE_RPS, DURATION_S, SEED = 70.0, 120.0, 0


def request(design: str, preset: str, engine: str, jobs: int = 1) -> SearchRequest:
    return SearchRequest(
        designs=(design,),
        engine=engine,
        jobs=jobs,
        seed=SEED,
        workload=WorkloadRequest(workload=preset, rate_rps=RATE_RPS, duration_s=DURATION_S),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    cases = []
    for design, preset in CASES:
        t0 = time.perf_counter()
        out = search(request(design, preset, "des", args.jobs))
        r = out.results[0]
        feasible = sorted(
            [int(p.prompt_machines or 0), int(p.token_machines or 0)] for p in out.points if p.meets_slo
        )
        cases.append(
            {
                "design": design,
                "workload": preset,
                "rate_rps": RATE_RPS,
                "duration_s": DURATION_S,
                "seed": SEED,
                "prompt_machines": r.prompt_machines,
                "token_machines": r.token_machines,
                "cost_usd_per_h": r.cost_usd_per_h,
                "des_evaluations": out.des_evaluations,
                "feasible": feasible,
            }
        )
        print(
            f"{design} {preset}: {r.prompt_machines}P+{r.token_machines}T "
            f"({out.des_evaluations} DES runs, {time.perf_counter() - t0:.1f} s)",
            flush=True,
        )
    GOLDEN.write_text(
        json.dumps({"command": "python tests/golden/regen_search.py", "cases": cases}, indent=1) + "\n"
    )


if __name__ == "__main__":
    main()
