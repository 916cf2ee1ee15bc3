"""Analytic evaluator speed: configuration points per second on one core.

    python tests/benchmarks/bench_analytic.py [--repeat 7] [--sample-size N]

Times `evaluate_grid` on the 39×39 (prompt × token) grid of Splitwise-HH and Splitwise-HA for the
coding and conversation presets (Llama2-70B, 70 req/s, 120 s, analytic performance model) at the
default sample size, and the whole `api.heatmap` call (analytic engine) on the same grid; then
the two baselines (Baseline-H100 and Baseline-A100, same workloads) on as many points, machine
counts 1 … 39 at 39 rate scales 0.5 … 2 (a baseline's evaluation marches each point's own decode
batch over the trace, so its cost per point differs from a split design's). Prints the median
over the repeats (the first, warm-up call is not counted). Target: ≥ 10,000 points/s and the
39×39 heatmap in under a second.
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


def _cases(designs: tuple[str, ...]):
    """(design, preset, scenario) for both presets: Llama2-70B, 70 req/s, 120 s."""
    for preset in ("coding", "conversation"):
        wl = make_workload(preset, rate_rps=70, duration_s=120, seed=0)
        sc = Scenario(workload=wl, model=get_model("llama2-70b"))
        for name in designs:
            yield get_design(name), preset, sc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--sample-size", type=int, default=None)
    args = ap.parse_args()
    size = args.sample_size
    v = np.arange(1, 40)
    P, T = (a.ravel() for a in np.meshgrid(v, v, indexing="ij"))
    n = len(P)
    print(f"39×39 grid = {n} points, sample size {size or DEFAULT_SAMPLE_SIZE}, median of {args.repeat}")
    rates = []
    for d, preset, sc in _cases(("splitwise-hh", "splitwise-ha")):
        wall = timed(lambda d=d, sc=sc: evaluate_grid(d, P, T, sc, sample_size=size), args.repeat)
        hm = timed(
            lambda d=d, sc=sc: api.heatmap(d, sc, (1, 39), (1, 39), "analytic", sample_size=size), args.repeat
        )
        rates.append(n / wall)
        print(
            f"  {d.name:13s} {preset:12s} evaluate_grid {wall * 1000:7.1f} ms "
            f"= {n / wall:9,.0f} points/s;  heatmap (analytic) {hm * 1000:7.1f} ms"
        )
    print(f"median throughput: {statistics.median(rates):,.0f} points/s (split designs)")
    machines, rate_scale = (a.ravel() for a in np.meshgrid(v, np.linspace(0.5, 2.0, 39), indexing="ij"))
    rates = []
    for d, preset, sc in _cases(("baseline-h100", "baseline-a100")):
        wall = timed(
            lambda d=d, sc=sc: evaluate_grid(d, machines, 0, sc, rate_scale, sample_size=size), args.repeat
        )
        rates.append(n / wall)
        print(f"  {d.name:13s} {preset:12s} evaluate_grid {wall * 1000:7.1f} ms = {n / wall:9,.0f} points/s")
    print(f"median throughput: {statistics.median(rates):,.0f} points/s (baselines)")


if __name__ == "__main__":
    main()
