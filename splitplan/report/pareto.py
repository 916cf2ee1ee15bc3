"""Layer 6: the cost–power and cost–throughput Pareto fronts of every design (cf. the Splitwise
paper's Fig. 18/19), from a search's evaluated points, and their figure.

A candidate is a configuration that meets all nine SLOs within the budget. Throughput searches
judge a configuration at several rates; its throughput is the highest rate it met the SLOs at.
Optima follow the search's ranking (SearchOutcome.best across designs, grid.best_index within one):
cost → lowest $/h, then lowest kW; power → lowest kW, then lowest $/h; throughput → highest req/s,
then lowest $/h; remaining ties → fewer machines, then fewer prompt machines.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from splitplan._io import write_with
from splitplan.errors import InputError
from splitplan.report.render import counts_label
from splitplan.search.result import INSTANCE_KEYS

CANDIDATE_KEYS: tuple[str, ...] = (
    "design",
    "prompt_gpu",
    "token_gpu",
    "prompt_power_cap",
    "token_power_cap",
    "prompt_machines",
    "token_machines",
    "machines",
    "cost_usd_per_h",
    "power_kw",
    "rate_rps",
    "decided_by",
    # the instances, where the points have them (a search over TP or precision): two counts of
    # TP-4 instances on the same nodes are two configurations
    *INSTANCE_KEYS,
)
_IDENTITY = (*CANDIDATE_KEYS[:8], *INSTANCE_KEYS)


def _finite(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def candidates(points: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Feasible in-budget configurations, one per configuration (its highest feasible rate)."""
    best: dict[tuple, dict[str, Any]] = {}
    for p in points:
        if not p.get("meets_slo") or p.get("within_budget") is False:
            continue
        if not all(_finite(p.get(k)) for k in ("cost_usd_per_h", "power_kw", "rate_rps")):
            continue
        rec = {k: p.get(k) for k in CANDIDATE_KEYS}
        key = tuple(rec[k] for k in _IDENTITY)
        old = best.get(key)
        if (
            old is None
            or rec["rate_rps"] > old["rate_rps"]
            or (rec["rate_rps"] == old["rate_rps"] and rec["decided_by"] == "des")
        ):
            best[key] = rec
    return sorted(best.values(), key=_cost_key)


def _tail(c: Mapping[str, Any]) -> tuple:
    return (int(c.get("machines") or 0), int(c.get("prompt_machines") or c.get("machines") or 0))


def _cost_key(c: Mapping[str, Any]) -> tuple:
    return (round(c["cost_usd_per_h"], 9), round(c["power_kw"], 9), *_tail(c))


def _power_key(c: Mapping[str, Any]) -> tuple:
    return (round(c["power_kw"], 9), round(c["cost_usd_per_h"], 9), *_tail(c))


def _throughput_key(c: Mapping[str, Any]) -> tuple:
    return (-round(c["rate_rps"], 9), round(c["cost_usd_per_h"], 9), *_tail(c))


def cost_power_front(cands: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Configurations no other is cheaper and lower-power than (both ≤, one <), by rising cost."""
    front, low = [], math.inf
    for c in sorted(cands, key=_cost_key):
        if round(c["power_kw"], 9) < low:
            front.append(c)
            low = round(c["power_kw"], 9)
    return front


def cost_throughput_front(cands: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Configurations no other is cheaper and higher-throughput than, by rising cost."""
    front, high = [], -math.inf
    for c in sorted(cands, key=lambda c: (round(c["cost_usd_per_h"], 9), *_throughput_key(c))):
        if round(c["rate_rps"], 9) > high:
            front.append(c)
            high = round(c["rate_rps"], 9)
    return front


@dataclass(frozen=True, slots=True, kw_only=True)
class ParetoFronts:
    """Both fronts across designs and the optimum of each objective (None: nothing feasible)."""

    source: str
    candidates: list[dict[str, Any]]
    cost_power: list[dict[str, Any]]
    cost_throughput: list[dict[str, Any]]
    optima: dict[str, dict[str, Any] | None]

    @property
    def designs(self) -> list[str]:
        return sorted({str(c["design"]) for c in self.candidates})

    def to_json(self) -> dict[str, object]:
        def clean(c: Mapping[str, Any] | None) -> dict[str, Any] | None:
            if c is None:
                return None
            return {k: (round(v, 9) if isinstance(v, float) else v) for k, v in c.items()}

        return {
            "source": self.source,
            "candidates": len(self.candidates),
            "designs": self.designs,
            "cost_power_front": [clean(c) for c in self.cost_power],
            "cost_throughput_front": [clean(c) for c in self.cost_throughput],
            "optima": {k: clean(v) for k, v in self.optima.items()},
        }


def pareto_fronts(points: Iterable[Mapping[str, Any]], source: str = "") -> ParetoFronts:
    cands = candidates(points)
    optima: dict[str, dict[str, Any] | None] = {
        "cost": min(cands, key=_cost_key) if cands else None,
        "power": min(cands, key=_power_key) if cands else None,
        "throughput": min(cands, key=_throughput_key) if cands else None,
    }
    return ParetoFronts(
        source=source,
        candidates=cands,
        cost_power=cost_power_front(cands),
        cost_throughput=cost_throughput_front(cands),
        optima=optima,
    )


def config_label(c: Mapping[str, Any]) -> str:
    return f"{c['design']} {counts_label(c)}"


def design_markers(cands: list[dict[str, Any]], designs: list[str]) -> tuple[dict[str, str], dict[str, int]]:
    """Each design's marker and size in the figure. A baseline of N machines costs and draws what
    a split design of the same machines does at P + T = N, and what another baseline of them does
    (chunked prefill): its points would hide under theirs. So split designs are small circles, and
    baselines, drawn beneath them, larger shapes: on one machine type the first a square, the
    next a smaller diamond, and so on, each left in sight around the next."""
    gpu_of = {c["design"]: c["prompt_gpu"] for c in cands if c.get("prompt_machines") is None}
    baselines = [d for d in designs if d in gpu_of]  # in the designs' order, as they are drawn
    marker, size = dict.fromkeys(designs, "o"), dict.fromkeys(designs, 22)
    for d in baselines:
        k = [b for b in baselines if gpu_of[b] == gpu_of[d]].index(d) % 4
        marker[d], size[d] = ("s", "D", "P", "X")[k], (64, 36, 28, 22)[k]
    return marker, size


def plot_pareto(path: str | Path, fronts: ParetoFronts, *, title: str, dpi: int | None = None) -> Path:
    """Two panels — cost vs power, cost vs throughput — every candidate coloured by design, each
    front as a step line, each objective's optimum marked. PNG, SVG or PDF by extension."""
    from splitplan.report.plot import DEFAULT_DPI, check_dpi, plot_format

    target = Path(path)
    fmt = plot_format(target)
    dpi = check_dpi(DEFAULT_DPI if dpi is None else dpi)
    if not fronts.candidates:
        raise InputError("no configuration meets all nine SLOs: nothing to plot")
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    designs = fronts.designs
    colours = matplotlib.colormaps["tab10"]
    colour = {d: colours(i % 10) for i, d in enumerate(designs)}
    shape, area = design_markers(fronts.candidates, designs)
    fig, (ax_p, ax_t) = plt.subplots(1, 2, figsize=(14, 6), constrained_layout=True)
    for ax, ykey, front, ylabel in (
        (ax_p, "power_kw", fronts.cost_power, "provisioned power (kW)"),
        (ax_t, "rate_rps", fronts.cost_throughput, "throughput meeting all nine SLOs (req/s)"),
    ):
        for d in designs:
            pts = [c for c in fronts.candidates if c["design"] == d]
            des = [c for c in pts if c["decided_by"] == "des"]
            other = [c for c in pts if c["decided_by"] != "des"]
            for group, face in ((des, colour[d]), (other, "none")):
                if group:
                    ax.scatter(
                        [c["cost_usd_per_h"] for c in group],
                        [c[ykey] for c in group],
                        s=area[d],
                        marker=shape[d],
                        facecolors=face,
                        edgecolors=[colour[d]],
                        linewidths=1.0,
                        alpha=0.85,
                        zorder=2 if shape[d] == "o" else 1,  # baselines beneath
                    )
        ax.step(
            [c["cost_usd_per_h"] for c in front],
            [c[ykey] for c in front],
            where="post",
            color="black",
            lw=1.6,
            zorder=3,
        )
        ax.set_xlabel("cost ($/h)")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    marks = (
        ("cost", "*", "cyan", 18, (ax_p, ax_t)),
        ("power", "o", "magenta", 14, (ax_p,)),
        ("throughput", "^", "gold", 14, (ax_t,)),
    )
    handles = [
        Line2D([], [], marker=shape[d], ls="none", mfc=colour[d], mec=colour[d], label=d) for d in designs
    ]
    handles.append(Line2D([], [], color="black", lw=1.6, label="Pareto front"))
    handles.append(
        Line2D(
            [], [], marker="o", ls="none", mfc="none", mec="grey", label="not simulated (screen or dominance)"
        )
    )
    for name, marker, face, size, axes in marks:
        c = fronts.optima[name]
        if c is None:
            continue
        for ax in axes:
            y = c["power_kw"] if ax is ax_p else c["rate_rps"]
            ax.plot(
                c["cost_usd_per_h"], y, marker=marker, ms=size, mfc=face, mec="black", ls="none", zorder=4
            )
        handles.append(
            Line2D([], [], marker=marker, ms=12, mfc=face, mec="black", ls="none",
                   label=f"{name}-optimal: {config_label(c)}")
        )  # fmt: skip
    if len({round(c["rate_rps"], 9) for c in fronts.candidates}) == 1:
        ax_t.text(
            0.5,
            0.12,
            "every configuration was judged at one rate:\n"
            "a throughput search (--objective throughput --budget …) traces this front",
            transform=ax_t.transAxes,
            ha="center",
            fontsize=10,
            bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "grey"},
        )
    ax_p.set_title("cost vs power")
    ax_t.set_title("cost vs throughput")
    fig.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=10)
    fig.suptitle(title, fontsize=13)

    def save(tmp: Path) -> None:
        fig.savefig(tmp, format=fmt, dpi=dpi, bbox_inches="tight")

    try:
        write_with(target, save)
    finally:
        plt.close(fig)
    return target
