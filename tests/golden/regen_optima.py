"""Regenerate tests/golden/optima.json: each case's optimum by exhaustive DES (engine "des").

python tests/golden/regen_optima.py [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

from optima_cases import CASES  # noqa: E402

from splitplan import __version__  # noqa: E402
from splitplan.api._search import SearchRequest, search  # noqa: E402
from splitplan.api._simulate import WorkloadRequest  # noqa: E402


def solve(case, engine: str, jobs: int = 1) -> dict[str, object]:
    req = SearchRequest(
        workload=WorkloadRequest(workload=case.workload, rate_rps=case.rate_rps, duration_s=case.duration_s),
        engine=engine,
        jobs=jobs,
        **case.request_kwargs(),
    )
    res = search(replace(req)).results[0].to_json()
    keep = (
        "prompt_machines",
        "token_machines",
        "machines",
        "cost_usd_per_h",
        "power_kw",
        "rate_rps",
        "meets_slo",
        "slowdown",
    )
    return {k: res[k] for k in keep}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    out = {"splitplan_version": __version__, "engine": "des", "cases": {}}
    for case in CASES:
        print(f"{case.id} …", flush=True)
        out["cases"][case.id] = solve(case, "des", args.jobs)
    (HERE / "optima.json").write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {HERE / 'optima.json'}")


if __name__ == "__main__":
    main()
