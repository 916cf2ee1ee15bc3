"""Refit the analytic chunked-prefill model's calibration against the stored DES verdicts.

    python tests/golden/fit_chunked_calibration.py

Grid search over ChunkedCalibration.jsq_sqrt (jsq_spread fixed at the baselines' 0.7) maximizing
the mean all-nine verdict agreement with tests/golden/des_grids/chunked.npz on the 70 req/s cases
(in-sample); prints, per value, in-sample and held-out (35 and 105 req/s) agreement and the largest
frontier difference, so the choice can be judged on data it was not fitted to.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import regen_chunked_grids as regen  # noqa: E402
import regen_des_grids as regen_grids  # noqa: E402

IN_SAMPLE = (70.0,)
HELD_OUT = (35.0, 105.0)
GRID = (0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.8, 0.9)


def agreement(cal, rates) -> tuple[float, float, int]:
    """(mean agreement, worst case's agreement, largest frontier difference) over the cases."""
    from splitplan.design import get_design
    from splitplan.sim import analytic

    z = np.load(regen.OUT)
    saved = analytic.CHUNKED_CALIBRATION
    analytic.CHUNKED_CALIBRATION = cal
    try:
        stats = []
        for d in regen.DESIGNS:
            for p in regen_grids.PRESETS:
                for r in rates:
                    sel = (z["design"] == d) & (z["preset"] == p) & (z["rate_rps"] == r)
                    n = z["machines"][sel].astype(np.int64)
                    meets = z["meets"][sel]
                    b = analytic.evaluate_grid(get_design(d), n, np.zeros_like(n), regen.scenario(p, r))
                    des = int(n[meets].min()) if meets.any() else regen.MACHINES + 1
                    ana = int(n[b.meets_slo].min()) if b.meets_slo.any() else regen.MACHINES + 1
                    stats.append((float(np.mean(b.meets_slo == meets)), abs(des - ana)))
    finally:
        analytic.CHUNKED_CALIBRATION = saved
    return float(np.mean([s[0] for s in stats])), min(s[0] for s in stats), max(s[1] for s in stats)


def main() -> int:
    from splitplan.sim.analytic import ChunkedCalibration

    rows = []
    for b in GRID:
        cal = ChunkedCalibration(jsq_sqrt=b)
        fit, held = agreement(cal, IN_SAMPLE), agreement(cal, HELD_OUT)
        rows.append((fit[0], b))
        print(
            f"jsq_sqrt={b:.2f}  in-sample mean {fit[0]:.3f} worst {fit[1]:.3f} frontier ±{fit[2]}  |  "
            f"held-out mean {held[0]:.3f} worst {held[1]:.3f} frontier ±{held[2]}",
            flush=True,
        )
    print(f"best in-sample: jsq_sqrt = {max(rows)[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
