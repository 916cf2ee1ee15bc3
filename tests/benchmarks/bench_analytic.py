"""Analytic evaluator speed: configuration points per second on one core.

    python tests/benchmarks/bench_analytic.py [--repeat 7] [--sample-size N]

Times `evaluate_grid` on the 39×39 (prompt × token) grid of Splitwise-HH and Splitwise-HA for the
coding and conversation presets (Llama2-70B, 70 req/s, 120 s, analytic performance model) at the
default sample size, and the whole `api.heatmap` call (analytic engine) on the same grid. Prints
the median over the repeats (the first, warm-up call is not counted). Target: ≥ 10,000 points/s
and the 39×39 heatmap in under a second.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one core

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

from splitplan import api  # noqa: E402
from splitplan.catalog import get_model  # noqa: E402
from splitplan.design import get_design  # noqa: E402
from splitplan.sim.analytic import DEFAULT_SAMPLE_SIZE, evaluate_grid  # noqa: E402
from splitplan.sim.scenario import Scenario  # noqa: E402
from splitplan.workload import make_workload  # noqa: E402


def timed(fn, repeat: int) -> float:
    fn()  # warm-up: perf-model tables, lazy imports
    walls = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--sample-size", type=int, default=None)
    args = ap.parse_args()
    v = np.arange(1, 40)
    P, T = (a.ravel() for a in np.meshgrid(v, v, indexing="ij"))
    n = len(P)
    print(
        f"39×39 grid = {n} points, sample size {args.sample_size or DEFAULT_SAMPLE_SIZE}, "
        f"median of {args.repeat}"
    )
    rates = []
    for preset in ("coding", "conversation"):
        wl = make_workload(preset, rate_rps=70, duration_s=120, seed=0)
        sc = Scenario(workload=wl, model=get_model("llama2-70b"))
        for name in ("splitwise-hh", "splitwise-ha"):
            d = get_design(name)
            wall = timed(
                lambda d=d, sc=sc: evaluate_grid(d, P, T, sc, sample_size=args.sample_size), args.repeat
            )
            hm = timed(
                lambda d=d, sc=sc: api.heatmap(d, sc, (1, 39), (1, 39), sample_size=args.sample_size),
                args.repeat,
            )
            rates.append(n / wall)
            print(
                f"  {name:13s} {preset:12s} evaluate_grid {wall * 1000:7.1f} ms "
                f"= {n / wall:9,.0f} points/s;  heatmap (analytic) {hm * 1000:7.1f} ms"
            )
    print(f"median throughput: {statistics.median(rates):,.0f} points/s")


if __name__ == "__main__":
    main()
