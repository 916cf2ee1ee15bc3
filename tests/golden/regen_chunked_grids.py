"""Regenerate the DES verdicts of the chunked-prefill baselines the analytic evaluator is checked on.

    python tests/golden/regen_chunked_grids.py [--jobs 2]

For chunked-a100 and chunked-h100 on the coding and conversation presets (Llama2-70B, 120 s, seed 0,
analytic performance model, default simulator config: 512-token budget, decodes first) at three
rates (35, 70, 105 req/s) it simulates every cluster size 1..120 with the discrete-event simulator
and stores the nine slowdowns, stability and the all-nine verdict per point in
tests/golden/des_grids/chunked.npz, with a fingerprint of the performance model so that a stale
golden is detected, not trusted. Takes about ten minutes on 2 cores. Rerun after any change to the
DES or the performance model.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import regen_des_grids as regen  # noqa: E402

DESIGNS = ("chunked-a100", "chunked-h100")
RATES_RPS = (35.0, 70.0, 105.0)
MACHINES = 120
OUT = regen.OUT / "chunked.npz"


def scenario(preset: str, rate_rps: float):
    from splitplan.catalog import get_model
    from splitplan.sim.scenario import Scenario
    from splitplan.workload import make_workload

    wl = make_workload(preset, rate_rps=rate_rps, duration_s=regen.DURATION_S, seed=regen.SEED)
    return Scenario(workload=wl, model=get_model(regen.MODEL), seed=regen.SEED)


def _point(design_name: str, preset: str, rate_rps: float, machines: int) -> tuple:
    from splitplan.design import ClusterConfig, get_design
    from splitplan.sim.des import simulate_des
    from splitplan.slo import SLO_KEYS

    r = simulate_des(ClusterConfig.baseline(get_design(design_name), machines), scenario(preset, rate_rps))
    return (design_name, preset, rate_rps, machines, r.meets_slo, r.stable, [r.slowdown[k] for k in SLO_KEYS])


def regenerate(jobs: int, machines: int = MACHINES) -> Path:
    from joblib import Parallel, delayed

    t0 = time.perf_counter()
    tasks = [
        (d, p, x, n)
        for d in DESIGNS
        for p in regen.PRESETS
        for x in RATES_RPS
        for n in range(1, machines + 1)
    ]
    rows = Parallel(n_jobs=jobs)(delayed(_point)(*task) for task in tasks[::-1])[::-1]
    meta = regen._meta(
        designs=list(DESIGNS),
        presets=list(regen.PRESETS),
        rates_rps=list(RATES_RPS),
        machines=machines,
        chunk_tokens=512,
        perf_fingerprint={f"{d}_{p}": regen.perf_fingerprint(d, p) for d in DESIGNS for p in regen.PRESETS},
        regenerate="python tests/golden/regen_chunked_grids.py",
    )
    meta.pop("rate_rps")
    columns = {
        "design": np.array([r[0] for r in rows]),
        "preset": np.array([r[1] for r in rows]),
        "rate_rps": np.array([r[2] for r in rows], dtype=np.float64),
        "machines": np.array([r[3] for r in rows], dtype=np.int16),
        "meets": np.array([r[4] for r in rows], dtype=bool),
        "stable": np.array([r[5] for r in rows], dtype=bool),
        "slowdown": np.array([r[6] for r in rows], dtype=np.float32),
    }
    return regen._save(OUT, columns, meta, t0)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    regenerate(args.jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
