"""Layer 6: rich renderables — generic table helpers and the `search` summary (no printing here)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from splitplan.search.objective import Objective
from splitplan.search.result import DesignResult, SearchOutcome


def fmt(x: float | None, spec: str = ".1f", none: str = "—") -> str:
    """A number for a table cell; None/NaN/inf become a dash."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return none
    return format(x, spec)


def make_table(
    title: str | None,
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    right_from: int = 1,
    no_wrap: Sequence[int] = (0,),
) -> Any:
    """A compact rich Table (fits an 80-column terminal) with `columns`; columns from index
    `right_from` on are right-aligned (numbers), columns in `no_wrap` never wrap (names)."""
    from rich import box
    from rich.table import Table

    t = Table(
        title=title,
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        title_justify="left",
        padding=(0, 1),
        collapse_padding=True,
    )
    for i, c in enumerate(columns):
        t.add_column(c, justify="right" if i >= right_from else "left", no_wrap=i in no_wrap)
    for r in rows:
        t.add_row(*r)
    return t


def _config_cell(r: DesignResult) -> str:
    if not r.meets_slo:
        return "infeasible"
    if r.baseline:
        return f"N={r.machines}"
    return f"{r.prompt_machines}P+{r.token_machines}T"


def _pools_cell(r: DesignResult) -> str:
    def pool(gpu: str, cap: float) -> str:
        name = gpu.removeprefix("dgx-").upper()
        return name if cap == 1.0 else f"{name}@{cap:.2f}"

    if r.baseline:
        return pool(r.prompt_gpu, r.prompt_power_cap)
    return f"{pool(r.prompt_gpu, r.prompt_power_cap)} / {pool(r.token_gpu, r.token_power_cap)}"


def search_table(outcome: SearchOutcome) -> Any:
    """One row per design: best configuration, cost, power, throughput, binding SLO, verified-by."""
    best = outcome.best
    # paper designs say their pools in their names; show pools only for custom families
    show_pools = any(r.design.startswith("custom") for r in outcome.results)
    rows = []
    for r in outcome.results:
        star = " *" if best is not None and r is best else ""
        row = (
            [r.design + star]
            + ([_pools_cell(r)] if show_pools else [])
            + [
                _config_cell(r),
                fmt(r.cost_usd_per_h, ",.0f"),
                fmt(r.power_kw, ".1f"),
                fmt(r.rate_rps, ".1f"),
                (r.binding_slo or "—") if r.meets_slo else "—",
                fmt(None if r.headroom is None else 100 * r.headroom, "+.1f")
                + ("%" if r.headroom is not None and r.meets_slo else ""),
                (r.verified_by or "—") + (f"×{r.des_evaluations}" if r.des_evaluations else ""),
            ]
        )
        rows.append(row)
    title = (
        f"Best configuration per design (objective: {outcome.objective}; N = baseline machines; "
        "verified: engine×DES runs)"
    )
    columns = (
        ["design"]
        + (["pools"] if show_pools else [])
        + ["config", "$/h", "kW", "req/s", "binding", "headroom", "verified"]
    )
    first_number = 3 if show_pools else 2
    return make_table(title, columns, rows, right_from=first_number, no_wrap=tuple(range(len(columns))))


def search_summary(outcome: SearchOutcome) -> str:
    """The winner and its saving against the best baseline, as rich markup."""
    best = outcome.best
    infeasible = [r.design for r in outcome.results if not r.meets_slo]
    note = (
        f"\n[yellow]No configuration meets all nine SLOs for: {', '.join(infeasible)}[/]"
        if infeasible
        else ""
    )
    if best is None:
        return "[bold red]No design meets all nine SLOs in the searched space.[/]"
    what = {
        "cost": f"${best.cost_usd_per_h:,.2f}/h",
        "power": f"{best.power_kw:,.1f} kW",
        "throughput": f"{fmt(best.rate_rps, '.1f')} req/s",
    }[outcome.objective]
    line = f"[bold green]Winner:[/] {best.design} {_config_cell(best)} at {what}"
    save = outcome.savings_vs_baseline()
    base = outcome.best_baseline
    if save is not None and base is not None and base is not best:
        verb = {
            Objective.THROUGHPUT: "more throughput",
            Objective.POWER: "lower power",
            Objective.COST: "lower cost",
        }[outcome.objective]
        line += f" — {100 * save:.1f}% {verb} than the best baseline ({base.design})"
    line += (
        f"\n{outcome.evaluated_points} points evaluated, {outcome.des_evaluations} DES runs, "
        f"{outcome.wall_s:.1f} s"
    )
    return line + note
