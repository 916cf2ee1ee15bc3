"""Search speed: the default search, the hybrid 39 × 39 grid per design, and exhaustive DES sweeps.

    python tests/benchmarks/bench_search.py [--repeat 3] [--jobs 2] [--exhaustive]

Prints medians over repeats (each in a fresh process, so numba loads from its cache and Python
the package's bytecode as a user's run would; see _bytecode.py): `splitplan search` with no
arguments; per design and preset, the hybrid search of the 39 × 39 grid (wall time, DES runs,
agreement with tests/golden/search_exhaustive.json). With --exhaustive it also times the
exhaustive DES sweep of the same grids (minutes).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _bytecode import compile_package

HERE = Path(__file__).resolve()
REPO = HERE.parents[2]
GOLDEN = json.loads((REPO / "tests" / "golden" / "search_exhaustive.json").read_text())


def run_cli(args: list[str]) -> tuple[float, dict]:
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "splitplan", "search", *args, "--json"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return time.perf_counter() - t0, json.loads(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--exhaustive", action="store_true")
    args = ap.parse_args()
    compile_package(REPO)
    run_cli(["--design", "splitwise-hh", "--prompt-range", "1:2", "--token-range", "1:2"])  # warm caches

    for jobs in (1, args.jobs):
        walls = [run_cli(["--jobs", str(jobs)])[0] for _ in range(args.repeat)]
        print(
            f"default search, --jobs {jobs}: median {statistics.median(walls):.1f} s "
            f"(process wall incl. start-up; runs {', '.join(f'{w:.1f}' for w in walls)})"
        )

    for case in GOLDEN["cases"]:
        base = [
            "--design",
            case["design"],
            "--workload",
            case["workload"],
            "--rate",
            str(case["rate_rps"]),
            "--duration",
            str(case["duration_s"]),
            "--seed",
            str(case["seed"]),
            "--jobs",
            str(args.jobs),
        ]
        runs = [run_cli([*base, "--engine", "hybrid"]) for _ in range(args.repeat)]
        wall = statistics.median(w for w, _ in runs)
        doc = runs[0][1]
        r = doc["results"][0]
        want = (case["prompt_machines"], case["token_machines"])
        same = (r["prompt_machines"], r["token_machines"]) == want
        line = (
            f"{case['design']:<14} {case['workload']:<12} hybrid 39x39: {wall:5.1f} s, "
            f"{doc['des_evaluations']:4d} DES runs, optimum "
            f"{r['prompt_machines']}P+{r['token_machines']}T "
            f"({'=' if same else '!='} exhaustive {want[0]}P+{want[1]}T)"
        )
        if args.exhaustive:
            w_ex, d_ex = run_cli([*base, "--engine", "des"])
            line += (
                f"; exhaustive DES {w_ex:.1f} s ({d_ex['des_evaluations']} runs), ratio {w_ex / wall:.0f}x"
            )
        print(line, flush=True)


if __name__ == "__main__":
    main()
