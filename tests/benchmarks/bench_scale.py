"""Fleet scale: DES wall time and cost per event as rate and fleet grow together; evaluator points/s.

    python tests/benchmarks/bench_scale.py [--repeat 3] [--skip-des] [--skip-evaluator]
        [--max-rate 14000] [--points 20000] [--baseline] [--congested]

DES table: the coding preset (Llama2-70B, analytic performance model, 120 s, seed 0) at 70 req/s
per 20 machines — 70/20, 700/200, 7,000/2,000, 14,000/4,000 — on Splitwise-HH with 70 % prompt
machines (with --baseline also on Baseline-H100). Prints medians over the repeats of the kernel's
wall time (`sim_wall_s`) and CPU time (`extra["sim_cpu_s"]`, the thread that ran it: on a shared
machine it is the steadier figure), the kernel's events, ns per event (CPU / events) and its ratio
to the smallest fleet's (target: within 2× at 2,000 machines).

With --congested also a table of congested fleets, the runs a fleet-scale search makes most: the
default `splitplan search` scenario at 3,000 req/s on Splitwise-HH with 364 machines split as the
search probes them — 344P+19T and 325P+39T (token pools congested: hundreds of decodes waiting per
machine; both fail the SLOs) beside 333P+31T (the answer, passes).

Evaluator table: `evaluate_grid` points per second on square grids 39×39, 300×300 and
1500×1500 (Splitwise-HH, coding, 70 req/s). The larger grids are timed on a uniform random subset
of --points points of the whole grid (the per-point cost depends on the pool sizes in a chunk,
which a uniform subset preserves); --points 0 times every point.
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

from splitplan.catalog import get_model  # noqa: E402
from splitplan.design import ClusterConfig, get_design  # noqa: E402
from splitplan.sim.analytic import evaluate_grid  # noqa: E402
from splitplan.sim.des import simulate_des  # noqa: E402
from splitplan.sim.scenario import Scenario  # noqa: E402
from splitplan.workload import make_workload  # noqa: E402

DES_CASES = ((70, 20), (700, 200), (7_000, 2_000), (14_000, 4_000))
GRIDS = (39, 300, 1500)


def des_table(repeat: int, max_rate: float, baseline: bool) -> None:
    print(f"DES, coding preset, 120 s, median of {repeat}")
    print(
        f"{'design':14s} {'req/s':>7s} {'machines':>8s} {'requests':>9s} {'wall s':>8s} {'cpu s':>8s} "
        f"{'events':>10s} {'ns/event':>9s} {'x first':>8s}"
    )
    designs = ["splitwise-hh"] + (["baseline-h100"] if baseline else [])
    for name in designs:
        design = get_design(name)
        first = None
        for rate, machines in DES_CASES:
            if rate > max_rate:
                continue
            wl = make_workload("coding", rate_rps=rate, duration_s=120, seed=0)
            sc = Scenario(workload=wl, model=get_model("llama2-70b"))
            if design.is_baseline:
                cfg = ClusterConfig.baseline(design, machines)
            else:
                n_p = round(machines * 0.7)
                cfg = ClusterConfig(design=design, prompt_machines=n_p, token_machines=machines - n_p)
            runs = [simulate_des(cfg, sc) for _ in range(repeat)]
            wall = statistics.median(r.sim_wall_s for r in runs)
            cpu = statistics.median(r.extra["sim_cpu_s"] for r in runs)
            events = runs[0].extra["events"]
            ns = cpu / events * 1e9
            first = first or ns
            print(
                f"{name:14s} {rate:7d} {machines:8d} {wl.n:9d} {wall:8.3f} {cpu:8.3f} {events:10.0f} "
                f"{ns:9.1f} {ns / first:8.2f}"
            )


CONGESTED = ((344, 19), (325, 39), (333, 31))


def congested_table(repeat: int) -> None:
    from splitplan.api._simulate import WorkloadRequest, build_scenario

    sc = build_scenario(workload=WorkloadRequest(rate_rps=3000.0))
    design = get_design("splitwise-hh")
    n = sc.workload.n
    print(f"DES, congested fleets: default scenario at 3,000 req/s ({n:,} requests), median of {repeat}")
    print(f"{'config':>9s} {'meets':>6s} {'cpu s':>8s} {'events':>10s} {'ns/event':>9s} {'preemptions':>12s}")
    for n_p, n_t in CONGESTED:
        cfg = ClusterConfig(design=design, prompt_machines=n_p, token_machines=n_t)
        runs = [simulate_des(cfg, sc) for _ in range(repeat)]
        cpu = statistics.median(r.extra["sim_cpu_s"] for r in runs)
        events = runs[0].extra["events"]
        preempt = int(runs[0].per_request.preemptions.sum())
        print(
            f"{f'{n_p}P+{n_t}T':>9s} {runs[0].meets_slo!s:>6s} {cpu:8.3f} {events:10.0f} "
            f"{cpu / events * 1e9:9.1f} {preempt:12,d}"
        )


def evaluator_table(repeat: int, points: int) -> None:
    wl = make_workload("coding", rate_rps=70, duration_s=120, seed=0)
    sc = Scenario(workload=wl, model=get_model("llama2-70b"))
    design = get_design("splitwise-hh")
    rng = np.random.default_rng(0)
    print(f"evaluate_grid, splitwise-hh, coding 70 req/s, median of {repeat}")
    print(f"{'grid':>11s} {'points timed':>12s} {'wall s':>8s} {'cpu s':>8s} {'points/s (cpu)':>15s}")
    evaluate_grid(design, np.array([1]), np.array([1]), sc)  # warm-up: sample, perf tables
    for g in GRIDS:
        total = g * g
        subset = bool(points) and total > points
        idx = rng.choice(total, size=points, replace=False) if subset else np.arange(total)
        P = idx // g + 1
        T = idx % g + 1
        walls, cpus = [], []
        for _ in range(repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            evaluate_grid(design, P, T, sc)
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        print(f"{f'{g}x{g}':>11s} {len(idx):12d} {wall:8.3f} {cpu:8.3f} {len(idx) / cpu:15,.0f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-rate", type=float, default=14_000)
    ap.add_argument("--points", type=int, default=20_000)
    ap.add_argument("--baseline", action="store_true", help="also time Baseline-H100 in the DES table")
    ap.add_argument("--skip-des", action="store_true")
    ap.add_argument("--skip-evaluator", action="store_true")
    ap.add_argument("--congested", action="store_true", help="also time the congested fleets' table")
    args = ap.parse_args()
    if not args.skip_des:
        des_table(args.repeat, args.max_rate, args.baseline)
        if args.congested:
            congested_table(args.repeat)
    if not args.skip_evaluator:
        evaluator_table(args.repeat, args.points)


if __name__ == "__main__":
    main()
