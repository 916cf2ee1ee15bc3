"""Layer 6: the heatmap figure — nine slowdown panels over the (prompt, token) grid (cf. the
Splitwise paper's Fig. 12), with each panel's SLO limit, the all-nine frontier and the cost- and
power-optimal points marked. matplotlib (Agg backend) is imported inside the function.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import numpy.typing as npt

from splitplan._io import write_with
from splitplan.errors import InputError
from splitplan.slo import SLO_KEYS

_TITLES = {"ttft": "TTFT", "tbt": "TBT", "e2e": "E2E"}


def plot_heatmap(
    path: str | Path,
    *,
    prompt_values: npt.NDArray[np.int64],
    token_values: npt.NDArray[np.int64],
    slowdown: Mapping[str, npt.NDArray[np.float64]],
    meets_slo: npt.NDArray[np.bool_],
    limits: Mapping[str, float],
    cost_optimal: tuple[int, int] | None,
    power_optimal: tuple[int, int] | None,
    title: str,
) -> Path:
    """Write a 3×3 PNG; arrays are (prompt, token) matrices."""
    target = Path(path)
    if target.suffix.lower() != ".png":
        raise InputError(f"plot file must end in .png, got {target.name}")
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.colors import TwoSlopeNorm
    from matplotlib.lines import Line2D

    pv, tv = np.asarray(prompt_values), np.asarray(token_values)
    extent = (tv[0] - 0.5, tv[-1] + 0.5, pv[0] - 0.5, pv[-1] + 0.5)
    meets = np.asarray(meets_slo, dtype=float)
    fig, axes = plt.subplots(3, 3, figsize=(15, 13.5), constrained_layout=True)
    cmap = matplotlib.colormaps["RdYlGn_r"].with_extremes(over="#5a0014")
    for ax, key in zip(axes.ravel(), SLO_KEYS, strict=True):
        values = np.asarray(slowdown[key], dtype=float)
        limit = float(limits.get(key, np.nan))
        finite = values[np.isfinite(values)]
        lo = float(finite.min()) if finite.size else 0.0
        center = limit if np.isfinite(limit) else (float(np.median(finite)) if finite.size else 1.0)
        vmin = min(lo, 0.5 * center)
        vmax = 3.0 * center
        norm = TwoSlopeNorm(vmin=vmin, vcenter=center, vmax=vmax)
        im = ax.imshow(
            np.where(np.isfinite(values), values, vmax * 10),
            origin="lower",
            extent=extent,
            aspect="auto",
            cmap=cmap,
            norm=norm,
            interpolation="nearest",
        )
        if np.isfinite(limit) and finite.size and lo < limit < finite.max():
            ax.contour(tv, pv, values, levels=[limit], colors="white", linewidths=1.2, linestyles="--")
        if 0 < meets.sum() < meets.size:
            ax.contour(tv, pv, meets, levels=[0.5], colors="black", linewidths=1.6)
        # the power marker is a hollow ring drawn first, so a coinciding cost star stays visible
        if power_optimal is not None:
            ax.plot(
                power_optimal[1],
                power_optimal[0],
                marker="o",
                ms=20,
                mfc="none",
                mec="magenta",
                mew=3,
                ls="none",
            )
        if cost_optimal is not None:
            ax.plot(cost_optimal[1], cost_optimal[0], marker="*", ms=16, mfc="cyan", mec="black", ls="none")
        metric, pct = key.split("_p")
        ax.set_title(f"{_TITLES[metric]} P{pct} slowdown (SLO ≤ {limit:g})", fontsize=12)
        ax.set_xlabel("token machines")
        ax.set_ylabel("prompt machines")
        cb = fig.colorbar(im, ax=ax, extend="max", shrink=0.9)
        cb.set_label("slowdown (× alone on DGX-A100)")
        if np.isfinite(limit):
            cb.ax.axhline(limit, color="black", lw=2)
    co = f" {cost_optimal[0]}P+{cost_optimal[1]}T" if cost_optimal else " (none)"
    po = f" {power_optimal[0]}P+{power_optimal[1]}T" if power_optimal else " (none)"
    handles = [
        Line2D([], [], color="black", lw=1.6, label="all-nine SLO frontier"),
        Line2D([], [], color="white", lw=1.2, ls="--", label="this panel's SLO limit"),
        Line2D([], [], marker="*", ms=14, mfc="cyan", mec="black", ls="none", label="cost-optimal" + co),
        Line2D(
            [], [], marker="o", ms=14, mfc="none", mec="magenta", mew=3, ls="none", label="power-optimal" + po
        ),
    ]
    leg = fig.legend(
        handles=handles,
        loc="lower center",
        ncol=4,
        bbox_to_anchor=(0.5, -0.035),
        fontsize=12,
        facecolor="#bbbbbb",
    )
    leg.get_frame().set_edgecolor("black")
    fig.suptitle(title, fontsize=15)

    def save(tmp: Path) -> None:
        fig.savefig(tmp, format="png", dpi=90, bbox_inches="tight")

    try:
        write_with(target, save)
    finally:
        plt.close(fig)
    return target
