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

    def tp(n: int | None) -> str:
        return "" if n is None or n == 8 else f"×tp{n}"

    if r.baseline:
        if r.instances is not None and r.instances != r.machines:
            return f"N={r.instances}{tp(r.prompt_tp)}"
        return f"N={r.machines}"
    if r.prompt_instances is not None and (
        r.prompt_instances != r.prompt_machines or r.token_instances != r.token_machines
    ):
        return f"{r.prompt_instances}P{tp(r.prompt_tp)}+{r.token_instances}T{tp(r.token_tp)}"
    return f"{r.prompt_machines}P+{r.token_machines}T"


def _pools_cell(r: DesignResult) -> str:
    def pool(gpu: str, cap: float) -> str:
        name = gpu.removeprefix("dgx-").upper()
        return name if cap == 1.0 else f"{name}@{cap:.2f}"

    if r.baseline:
        return pool(r.prompt_gpu, r.prompt_power_cap)
    return f"{pool(r.prompt_gpu, r.prompt_power_cap)} / {pool(r.token_gpu, r.token_power_cap)}"


def _instance_cell(r: DesignResult) -> str:
    """Each pool's instance: TP and weight precision (and KV precision where it differs)."""

    def inst(tp: int | None, w: str | None, kv: str | None) -> str:
        extra = "" if kv in (None, w) else f"+kv{kv}"
        return f"tp{tp} {w}{extra}"

    p = inst(r.prompt_tp, r.prompt_precision, r.prompt_kv_precision)
    if r.baseline:
        return p
    return f"{p} / {inst(r.token_tp, r.token_precision, r.token_kv_precision)}"


def _paper_instances(r: DesignResult) -> bool:
    fp16 = all(x in (None, "fp16") for x in (r.prompt_precision, r.token_precision))
    kv16 = all(x in (None, "fp16") for x in (r.prompt_kv_precision, r.token_kv_precision))
    return fp16 and kv16 and r.prompt_instances == r.prompt_machines and r.token_instances == r.token_machines


def search_table(outcome: SearchOutcome) -> Any:
    """One row per design: best configuration, cost, power, throughput, binding SLO, verified-by."""
    best = outcome.best
    # paper designs say their pools in their names; show pools only for custom families
    show_pools = any(r.design.startswith("custom") for r in outcome.results)
    show_instances = not all(_paper_instances(r) for r in outcome.results)
    rows = []
    for r in outcome.results:
        star = " *" if best is not None and r is best else ""
        row = (
            [r.design + star]
            + ([_pools_cell(r)] if show_pools else [])
            + ([_instance_cell(r)] if show_instances else [])
            + [
                _config_cell(r),
                fmt(r.cost_usd_per_h, ",.0f"),
                fmt(r.power_kw, ".1f"),
                fmt(r.rate_rps, ".1f"),
                (r.binding_slo or "—") if r.meets_slo else _short_slo(r),
                fmt(None if r.headroom is None else 100 * r.headroom, "+.1f")
                + ("%" if r.headroom is not None and r.meets_slo else "")
                if r.meets_slo
                else _short_margin(r),
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
        + (["instances"] if show_instances else [])
        + ["config", "$/h", "kW", "req/s", "binding", "headroom", "verified"]
    )
    first_number = 2 + int(show_pools) + int(show_instances)
    return make_table(title, columns, rows, right_from=first_number, no_wrap=tuple(range(len(columns))))


def _short_slo(r: DesignResult) -> str:
    """An infeasible row's binding cell: the SLO its closest configuration misses."""
    return str((r.shortfall or {}).get("slo") or "—")


def _short_margin(r: DesignResult) -> str:
    """An infeasible row's headroom cell: the closest configuration's (negative) margin."""
    sf = r.shortfall or {}
    if sf.get("unstable"):
        return "overload"
    m = sf.get("margin")
    return "—" if m is None else f"{100 * float(m):+.1f}%"  # type: ignore[arg-type]


_LIMIT_HINT = {
    "range": "the count range (raise --max-machines or widen --prompt-range/--token-range)",
    "budget": "the budget (points that pass cost or draw more than it allows)",
    "memory": "memory (the exhaustive grid would not fit; use the hybrid engine)",
}


def infeasible_line(r: DesignResult) -> str:
    """Why a design has no answer: its closest configuration, binding SLO, shortfall and limit."""
    head = f"No configuration of {r.design} meets all nine SLOs"
    c, sf = r.closest, r.shortfall or {}
    if c is None:
        return head + "." if r.limited_by is None else f"{head}; limited by {_LIMIT_HINT[r.limited_by]}."
    where = f"N={c['machines']}" if r.baseline else f"{c['prompt_machines']}P+{c['token_machines']}T"
    if sf.get("unstable"):
        miss = "is overloaded (unstable)"
    elif sf.get("over_limit") is not None:
        miss = f"misses {sf.get('slo')} by {100 * float(sf['over_limit']):.0f}%"  # type: ignore[arg-type]
    else:
        miss = f"misses {sf.get('slo')}"
    line = f"{head}: closest {where} ({c['decided_by']}) {miss}"
    if r.limited_by is not None:
        line += f"; limited by {_LIMIT_HINT[r.limited_by]}"
    return line + "."


def search_summary(outcome: SearchOutcome) -> str:
    """The winner and its saving against the best baseline, as rich markup."""
    best = outcome.best
    infeasible = [r for r in outcome.results if not r.meets_slo]
    note = "".join(f"\n[yellow]{infeasible_line(r)}[/]" for r in infeasible) + "".join(
        f"\n[yellow]Note: {n}[/]" for n in outcome.notes
    )
    if best is None:
        return "[bold red]No design meets all nine SLOs in the searched space.[/]"
    what = {
        "cost": f"${best.cost_usd_per_h:,.2f}/h",
        "power": f"{best.power_kw:,.1f} kW",
        "throughput": f"{fmt(best.rate_rps, '.1f')} req/s",
    }[outcome.objective]
    inst = "" if _paper_instances(best) else f" ({_instance_cell(best)})"
    line = f"[bold green]Winner:[/] {best.design} {_config_cell(best)}{inst} at {what}"
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
