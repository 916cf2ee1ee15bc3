"""Layer 6: the heatmap figure — nine slowdown panels over the (prompt, token) grid (cf. the
Splitwise paper's Fig. 12), with each panel's SLO limit, the all-nine frontier and the cost- and
power-optimal points marked. matplotlib (Agg backend) is imported inside the function.

Each metric row (TTFT, TBT, E2E) shares one logarithmic colour scale and one colour bar, so the
three percentiles of a metric compare by colour; the bar carries the row's three limits. Limit
lines are drawn white over black so they show on pale and dark cells alike; overloaded points
(queues grow without bound, no finite slowdown) have their own colour, named in the legend.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import numpy.typing as npt

from splitplan._io import write_with
from splitplan.errors import InputError
from splitplan.slo import METRICS, PERCENTILES

_TITLES = {"ttft": "TTFT", "tbt": "TBT", "e2e": "E2E"}
# Output formats by file extension (what matplotlib's savefig calls them).
PLOT_FORMATS: dict[str, str] = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
DEFAULT_DPI = 150
OVERLOADED_COLOR = "#3b3b3b"  # no finite slowdown: the point is unstable
ABOVE_SCALE_COLOR = "#5a0014"  # finite, but beyond the colour scale's top


def plot_format(path: str | Path) -> str:
    """The figure format named by `path`'s extension (png, svg, pdf); one clear error otherwise."""
    suffix = Path(path).suffix.lower()
    if suffix not in PLOT_FORMATS:
        raise InputError(f"plot file must end in .png, .svg or .pdf, got {Path(path).name}")
    return PLOT_FORMATS[suffix]


def check_dpi(dpi: object, *, name: str = "dpi") -> int:
    """`dpi` as a resolution, or one clear error naming it as `name` (a library caller's parameter
    by default; the CLI passes its flag's name)."""
    if isinstance(dpi, bool) or not isinstance(dpi, int) or not (10 <= dpi <= 1200):
        raise InputError(f"{name} must be an integer from 10 to 1200, got {dpi!r}")
    return dpi


def check_plot_dpi(
    dpi: object, plot: str | Path | None, *, name: str = "--dpi", plot_name: str = "--plot"
) -> None:
    """A resolution given for a plot (the CLI's `--dpi` beside `--plot`): it needs the plot, a value
    in range, and a raster figure. A .svg or .pdf figure is vector and would ignore it, so it is
    refused there rather than dropped."""
    if dpi is None:
        return
    if plot is None:
        raise InputError(f"{name} applies to {plot_name}; give {plot_name} FILE too")
    check_dpi(dpi, name=name)
    if plot_format(plot) != "png":
        raise InputError(f"{name} sets a PNG's resolution; {Path(plot).name} is a vector figure")


def row_scale(
    slowdown: Mapping[str, npt.NDArray[np.float64]], limits: Mapping[str, float], metric: str
) -> tuple[float, float]:
    """(vmin, vmax) of one metric row's shared log scale: from below the smallest value (and half
    the smallest limit) to three times the largest limit, so every limit lies inside the scale."""
    keys = [f"{metric}_p{q}" for q in PERCENTILES]
    values = np.concatenate([np.asarray(slowdown[k], dtype=float).ravel() for k in keys])
    finite = values[np.isfinite(values) & (values > 0)]
    lims = [float(limits[k]) for k in keys if k in limits and np.isfinite(limits[k])]
    lo_lim = min(lims) if lims else (float(np.median(finite)) if finite.size else 1.0)
    hi_lim = max(lims) if lims else lo_lim
    vmin = min(float(finite.min()) if finite.size else lo_lim, 0.5 * lo_lim)
    vmax = max(3.0 * hi_lim, vmin * 10.0)
    return vmin, vmax


def _limit_ticks(row_limits: list[tuple[float, str]]) -> tuple[list[float], list[str]]:
    """Colour-bar ticks at a row's limits; limits closer than a factor 1.35 share one tick, so
    labels never overlap."""
    groups: list[list[tuple[float, str]]] = []
    for item in sorted(row_limits):
        if groups and item[0] / groups[-1][-1][0] < 1.35:
            groups[-1].append(item)
        else:
            groups.append([item])
    ticks = [g[0][0] if len(g) == 1 else float(np.exp(np.mean(np.log([v for v, _ in g])))) for g in groups]
    # the larger limit's label on top, as on the bar
    return ticks, ["\n".join(label for _, label in reversed(g)) for g in groups]


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
    dpi: int = DEFAULT_DPI,
) -> Path:
    """Write the 3×3 figure as PNG, SVG or PDF (by extension); arrays are (prompt, token) matrices."""
    target = Path(path)
    fmt = plot_format(target)
    dpi = check_dpi(dpi)
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib import patheffects
    from matplotlib.colors import LogNorm
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    pv, tv = np.asarray(prompt_values), np.asarray(token_values)
    extent = (tv[0] - 0.5, tv[-1] + 0.5, pv[0] - 0.5, pv[-1] + 0.5)
    meets = np.asarray(meets_slo, dtype=float)
    fig, axes = plt.subplots(3, 3, figsize=(15, 13.5), constrained_layout=True)
    cmap = matplotlib.colormaps["RdYlGn_r"].with_extremes(over=ABOVE_SCALE_COLOR, bad=OVERLOADED_COLOR)
    halo = [patheffects.Stroke(linewidth=3.2, foreground="black"), patheffects.Normal()]
    for row, metric in enumerate(METRICS):
        vmin, vmax = row_scale(slowdown, limits, metric)
        norm = LogNorm(vmin=vmin, vmax=vmax)
        im = None
        for col, pct in enumerate(PERCENTILES):
            ax, key = axes[row, col], f"{metric}_p{pct}"
            values = np.asarray(slowdown[key], dtype=float)
            bad = ~np.isfinite(values) | (values <= 0)
            limit = float(limits.get(key, np.nan))
            im = ax.imshow(
                np.ma.masked_array(np.where(bad, 1.0, values), mask=bad),
                origin="lower",
                extent=extent,
                aspect="auto",
                cmap=cmap,
                norm=norm,
                interpolation="nearest",
            )
            finite = values[~bad]
            if np.isfinite(limit) and finite.size and finite.min() < limit < finite.max():
                cs = ax.contour(
                    tv,
                    pv,
                    np.where(bad, vmax * 10, values),
                    levels=[limit],
                    colors="white",
                    linewidths=1.4,
                    linestyles="--",
                )
                cs.set_path_effects(halo)  # white over black: visible on any cell colour
            if 0 < meets.sum() < meets.size:
                ax.contour(tv, pv, meets, levels=[0.5], colors="black", linewidths=1.8)
            # the power marker is a hollow ring drawn first, so a coinciding cost star stays visible
            if power_optimal is not None:
                ax.plot(
                    power_optimal[1], power_optimal[0], marker="o", ms=20, mfc="none", mec="magenta",
                    mew=3, ls="none",
                )  # fmt: skip
            if cost_optimal is not None:
                ax.plot(
                    cost_optimal[1], cost_optimal[0], marker="*", ms=16, mfc="cyan", mec="black", ls="none"
                )
            ax.set_title(f"{_TITLES[metric]} P{pct} slowdown (SLO ≤ {limit:g})", fontsize=12)
            ax.set_xlabel("token machines")
            ax.set_ylabel("prompt machines")
            for axis in (ax.xaxis, ax.yaxis):  # machine counts: no 2.5-machine tick
                axis.set_major_locator(MaxNLocator(integer=True))
        assert im is not None  # every row has one panel per percentile
        cb = fig.colorbar(im, ax=list(axes[row]), extend="max", shrink=0.9, pad=0.01)
        cb.set_label(f"{_TITLES[metric]} slowdown (× alone on DGX-A100)")
        row_limits = [
            (float(limits[f"{metric}_p{q}"]), f"P{q} ≤ {float(limits[f'{metric}_p{q}']):g}")
            for q in PERCENTILES
            if np.isfinite(limits.get(f"{metric}_p{q}", np.nan))
        ]
        for limit, _ in row_limits:
            cb.ax.axhline(limit, color="black", lw=2)
        ticks, labels = _limit_ticks(row_limits)
        cb.set_ticks(ticks, labels=labels, fontsize=9)
        cb.ax.minorticks_off()
    co = f" {cost_optimal[0]}P+{cost_optimal[1]}T" if cost_optimal else " (none)"
    po = f" {power_optimal[0]}P+{power_optimal[1]}T" if power_optimal else " (none)"
    limit_line = Line2D([], [], color="white", lw=1.4, ls="--", label="this panel's SLO limit")
    limit_line.set_path_effects(halo)
    handles = [
        Line2D([], [], color="black", lw=1.8, label="all-nine SLO frontier"),
        limit_line,
        Line2D([], [], marker="*", ms=14, mfc="cyan", mec="black", ls="none", label="cost-optimal" + co),
        Line2D(
            [], [], marker="o", ms=14, mfc="none", mec="magenta", mew=3, ls="none", label="power-optimal" + po
        ),
        Patch(facecolor=OVERLOADED_COLOR, edgecolor="black", label="overloaded (unstable, no slowdown)"),
        Patch(facecolor=ABOVE_SCALE_COLOR, edgecolor="black", label="above the colour scale"),
    ]
    leg = fig.legend(
        handles=handles,
        loc="lower center",
        ncol=3,
        bbox_to_anchor=(0.5, -0.06),
        fontsize=12,
        facecolor="#bbbbbb",
    )
    leg.get_frame().set_edgecolor("black")
    fig.suptitle(title, fontsize=15)

    def save(tmp: Path) -> None:
        fig.savefig(tmp, format=fmt, dpi=dpi, bbox_inches="tight")

    try:
        write_with(target, save)
    finally:
        plt.close(fig)
    return target
