"""DES runs the hybrid search spends behind the analytic screen, per case (fewer = better screen).

    python tests/benchmarks/bench_screen_des_runs.py [--jobs 1] [--only optima|grids]

For the 12 golden optima cases (tests/golden/optima_cases.py) and the four 39 × 39 cases of
tests/golden/search_exhaustive.json it runs the default (hybrid) search, prints the DES runs it
needed and whether its optimum equals the golden one. Compare the counts before and after a change
of the analytic evaluator: a better screen needs no more DES runs, and the optima must stay exact.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()
REPO = HERE.parents[2]
GOLDEN = REPO / "tests" / "golden"
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(GOLDEN))

from optima_cases import CASES  # noqa: E402
from regen_search import request  # noqa: E402

from splitplan.api._search import SearchRequest, search  # noqa: E402
from splitplan.api._simulate import WorkloadRequest  # noqa: E402


def optima_case(case, jobs: int) -> tuple[int, bool]:
    req = SearchRequest(
        workload=WorkloadRequest(workload=case.workload, rate_rps=case.rate_rps, duration_s=case.duration_s),
        engine="hybrid",
        jobs=jobs,
        **case.request_kwargs(),
    )
    out = search(req)
    got = out.results[0].to_json()
    want = json.loads((GOLDEN / "optima.json").read_text())["cases"][case.id]
    keys = ("prompt_machines", "token_machines", "machines", "meets_slo")
    return out.des_evaluations, all(got[k] == want[k] for k in keys)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--only", choices=("optima", "grids"), default=None)
    args = ap.parse_args()
    total = 0
    if args.only != "grids":
        for case in CASES:
            t0 = time.perf_counter()
            runs, exact = optima_case(case, args.jobs)
            total += runs
            print(
                f"{case.id:<48} {runs:5d} DES runs  {'exact' if exact else 'DRIFTED'}"
                f"  ({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
    if args.only != "optima":
        golden = json.loads((GOLDEN / "search_exhaustive.json").read_text())["cases"]
        for g in golden:
            t0 = time.perf_counter()
            out = search(request(g["design"], g["workload"], "hybrid", args.jobs))
            r = out.results[0]
            exact = (r.prompt_machines, r.token_machines) == (g["prompt_machines"], g["token_machines"])
            total += out.des_evaluations
            label = f"{g['design']} {g['workload']} 39x39"
            print(
                f"{label:<48} {out.des_evaluations:5d} DES runs  {'exact' if exact else 'DRIFTED'}"
                f"  ({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
    print(f"total DES runs: {total}")


if __name__ == "__main__":
    main()
