"""Regenerate tests/golden/frontier_exhaustive.json: exhaustive DES over each case's automatic range.

    python tests/golden/regen_frontier.py [--jobs 2]

For every case of frontier_cases.py: the automatic range the search derives at the case's rate
(splitplan.search.ranges.derive_range), then an exhaustive DES sweep of that whole range (every
point simulated) and its optimum by the one tie-break rule.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

from frontier_cases import CASES  # noqa: E402

from splitplan.api._search import SearchRequest, build_problem, search  # noqa: E402
from splitplan.api._simulate import WorkloadRequest, build_scenario  # noqa: E402
from splitplan.search import SimEvaluator  # noqa: E402
from splitplan.search.context import SearchContext  # noqa: E402
from splitplan.search.parallel import Runner  # noqa: E402
from splitplan.search.ranges import derive_range  # noqa: E402
from splitplan.search.store import PointStore  # noqa: E402

OUT = HERE / "frontier_exhaustive.json"


def request(case, **kw) -> SearchRequest:
    return SearchRequest(
        designs=(case.design,),
        objective=case.objective,
        seed=0,
        workload=WorkloadRequest(workload=case.workload, rate_rps=case.rate_rps, duration_s=case.duration_s),
        **kw,
    )


def auto_range(case) -> tuple[tuple[int, int], tuple[int, int]]:
    req = request(case)
    sc = build_scenario(
        workload=req.workload, model=req.model, perf=None, config=None, slo=None, seed=0, chunk_tokens=None
    )
    pb = build_problem(req, case.rate_rps)
    ctx = SearchContext(
        problem=pb, evaluator=SimEvaluator(sc), runner=Runner(), store=PointStore(), progress=None
    )
    s = derive_range(ctx, pb.spaces[0])
    return s.prompt_range, s.token_range


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    cases = {}
    for case in CASES:
        t0 = time.perf_counter()
        pr, tr = auto_range(case)
        baseline = case.design.startswith("baseline")
        kw = {"prompt_range": pr} if baseline else {"prompt_range": pr, "token_range": tr}
        out = search(request(case, engine="des", jobs=args.jobs, **kw))
        r = out.results[0]
        cases[case.id] = {
            "prompt_range": list(pr),
            "token_range": None if baseline else list(tr),
            "prompt_machines": r.prompt_machines,
            "token_machines": r.token_machines,
            "machines": r.machines,
            "meets_slo": r.meets_slo,
            "des_evaluations": out.des_evaluations,
        }
        print(f"{case.id}: {cases[case.id]} ({time.perf_counter() - t0:.0f} s)", flush=True)
    doc = {"regenerate": "python tests/golden/regen_frontier.py", "cases": cases}
    OUT.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
