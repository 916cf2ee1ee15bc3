"""Regenerate the DES verdict grids the analytic evaluator is checked against.

    python tests/golden/regen_des_grids.py [--jobs 2] [--size 39] [--only grids|baselines]

For Splitwise-HH and Splitwise-HA on the coding and conversation presets (Llama2-70B, 70 req/s,
120 s, seed 0, analytic performance model, default simulator config) it simulates every
(prompt, token) point of the 1..39 × 1..39 grid with the discrete-event simulator and stores the
nine slowdowns, stability and the all-nine verdict per point in tests/golden/des_grids/*.npz,
with a fingerprint of the performance model so that a stale golden is detected, not trusted.
For Baseline-A100 and Baseline-H100 (same presets, rate and seed) it simulates 1..80 machines and
stores the verdicts and slowdowns in tests/golden/des_grids/baselines.npz.
Takes a few minutes on 2 cores. Rerun after any change to the DES or the performance model.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "des_grids"
DESIGNS = ("splitwise-hh", "splitwise-ha")
BASELINES = ("baseline-a100", "baseline-h100")
BASELINE_MACHINES = 80
PRESETS = ("coding", "conversation")
MODEL = "llama2-70b"
RATE_RPS = 70.0
DURATION_S = 120.0
SEED = 0


def scenario(preset: str, model: str = MODEL, rate_rps: float = RATE_RPS):
    """The grids' scenario (another model or rate: the accuracy tests' live grids off this point)."""
    from splitplan.catalog import get_model
    from splitplan.sim.scenario import Scenario
    from splitplan.workload import make_workload

    wl = make_workload(preset, rate_rps=rate_rps, duration_s=DURATION_S, seed=SEED)
    return Scenario(workload=wl, model=get_model(model), seed=SEED)


def perf_fingerprint(design_name: str, preset: str) -> list[float]:
    """Iteration times at a few probe sizes of both pools and the reference machine."""
    from splitplan.design import get_design

    sc = scenario(preset)
    d = get_design(design_name)
    out: list[float] = []
    for perf in (sc.perf_model(d.prompt), sc.perf_model(d.token), sc.reference_perf()):
        out += [
            float(perf.prompt_time_s(2048.0)),
            float(perf.token_time_s(32.0, 32.0 * 2000.0)),
            float(perf.decode_alone_time_s(1000.0)),
        ]
    return out


def _column(design_name: str, preset: str, prompt: int, tokens: list[int]) -> list[tuple]:
    from splitplan.design import ClusterConfig, get_design
    from splitplan.sim.des import simulate_des
    from splitplan.slo import SLO_KEYS

    sc = scenario(preset)
    d = get_design(design_name)
    rows = []
    for t in tokens:
        r = simulate_des(ClusterConfig(design=d, prompt_machines=prompt, token_machines=t), sc)
        rows.append((prompt, t, r.meets_slo, r.stable, [r.slowdown[k] for k in SLO_KEYS]))
    return rows


def _baseline_point(design_name: str, preset: str, machines: int) -> tuple:
    from splitplan.design import ClusterConfig, get_design
    from splitplan.sim.des import simulate_des
    from splitplan.slo import SLO_KEYS

    r = simulate_des(ClusterConfig.baseline(get_design(design_name), machines), scenario(preset))
    return (design_name, preset, machines, r.meets_slo, r.stable, [r.slowdown[k] for k in SLO_KEYS])


def _meta(**specific: object) -> dict[str, object]:
    """What a stored file was made from: the case-specific keys, then the common ones."""
    from splitplan._version import __version__
    from splitplan.slo import SLO_KEYS

    return {
        **specific,
        "model": MODEL,
        "rate_rps": RATE_RPS,
        "duration_s": DURATION_S,
        "seed": SEED,
        "perf": "analytic",
        "splitplan": __version__,
        "slo_keys": list(SLO_KEYS),
    }


def _save(path: Path, columns: dict[str, np.ndarray], meta: dict[str, object], t0: float) -> Path:
    np.savez_compressed(path, **columns, meta=np.array(json.dumps(meta)))
    print(
        f"{path.name}: {len(columns['meets'])} points in {time.perf_counter() - t0:.0f} s, "
        f"{int(columns['meets'].sum())} meet the SLOs",
        flush=True,
    )
    return path


def regenerate_baselines(jobs: int, machines: int = BASELINE_MACHINES) -> Path:
    """Every baseline size 1..machines for both baselines and presets, in one file."""
    from joblib import Parallel, delayed

    t0 = time.perf_counter()
    tasks = [(d, p, n) for d in BASELINES for p in PRESETS for n in range(1, machines + 1)]
    # largest clusters first: they take longest, so the pool stays balanced
    rows = Parallel(n_jobs=jobs)(delayed(_baseline_point)(d, p, n) for d, p, n in tasks[::-1])[::-1]
    meta = _meta(
        designs=list(BASELINES),
        presets=list(PRESETS),
        machines=machines,
        perf_fingerprint={f"{d}_{p}": perf_fingerprint(d, p) for d in BASELINES for p in PRESETS},
        regenerate="python tests/golden/regen_des_grids.py --only baselines",
    )
    columns = {
        "design": np.array([r[0] for r in rows]),
        "preset": np.array([r[1] for r in rows]),
        "machines": np.array([r[2] for r in rows], dtype=np.int16),
        "meets": np.array([r[3] for r in rows], dtype=bool),
        "stable": np.array([r[4] for r in rows], dtype=bool),
        "slowdown": np.array([r[5] for r in rows], dtype=np.float32),
    }
    return _save(OUT / "baselines.npz", columns, meta, t0)


def regenerate(design_name: str, preset: str, size: int, jobs: int) -> Path:
    from joblib import Parallel, delayed

    t0 = time.perf_counter()
    cols = Parallel(n_jobs=jobs)(
        delayed(_column)(design_name, preset, p, list(range(1, size + 1))) for p in range(1, size + 1)
    )
    rows = [r for col in cols for r in col]
    meta = _meta(
        design=design_name,
        preset=preset,
        perf_fingerprint=perf_fingerprint(design_name, preset),
        regenerate="python tests/golden/regen_des_grids.py",
    )
    columns = {
        "prompt": np.array([r[0] for r in rows], dtype=np.int16),
        "token": np.array([r[1] for r in rows], dtype=np.int16),
        "meets": np.array([r[2] for r in rows], dtype=bool),
        "stable": np.array([r[3] for r in rows], dtype=bool),
        "slowdown": np.array([r[4] for r in rows], dtype=np.float32),
    }
    return _save(OUT / f"{design_name}_{preset}.npz", columns, meta, t0)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--size", type=int, default=39)
    ap.add_argument("--design", action="append", choices=DESIGNS)
    ap.add_argument("--preset", action="append", choices=PRESETS)
    ap.add_argument("--only", choices=("grids", "baselines"), default=None)
    args = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    if args.only != "baselines":
        for design_name in args.design or DESIGNS:
            for preset in args.preset or PRESETS:
                regenerate(design_name, preset, args.size, args.jobs)
    if args.only != "grids":
        regenerate_baselines(args.jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
