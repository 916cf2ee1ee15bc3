"""Layer 6: rich renderables — generic table helpers and the `search` summary (no printing here)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from splitplan.search.objective import Objective
from splitplan.search.result import DesignResult, SearchOutcome


def fmt(x: float | None, spec: str = ".1f", none: str = "—") -> str:
    """A number for a table cell; None/NaN/inf become a dash."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return none
    return format(x, spec)


NAME_WIDTH = 20  # a name longer than this is broken over lines (at `+`, `/`, `-`) in 80 columns
CONFIG_WIDTH = 10  # the same for a configuration (`3P×tp2+1T×tp2`), broken after its `+`


def breakable(name: str, width: int = NAME_WIDTH) -> str:
    """`name` over lines of at most `width` characters, broken after `+` or `/` (then `-`) where
    it is longer: a long custom design name stays whole in a narrow table, never cut off."""
    if len(name) <= width:
        return name
    parts = re.split(r"(?<=[+/])", name)
    pieces: list[str] = []
    for part in parts:
        if len(part) <= width:
            pieces.append(part)
            continue
        for sub in re.split(r"(?<=-)", part):
            pieces.extend(sub[i : i + width] for i in range(0, len(sub), width))
    lines = [""]
    for piece in pieces:
        if lines[-1] and len(lines[-1]) + len(piece) > width:
            lines.append("")
        lines[-1] += piece
    return "\n".join(lines)


def make_table(
    title: str | None,
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    right_from: int = 1,
    no_wrap: Sequence[int] = (0,),
    left: Sequence[int] = (),
    wide: bool = False,
) -> Any:
    """A compact table with `columns` that fits the console it is printed on; columns from index
    `right_from` on are right-aligned (numbers) unless in `left`.

    Values of columns in `no_wrap` never wrap (names, numbers: such a column is as wide as its
    longest value line); the other columns wrap their values, folding a word too long for them.
    Headers wrap between words where the width is short. So a table fits an 80-column terminal
    without cutting a header or a name to an ellipsis. `wide`: nothing wraps; the table takes the
    width it needs."""
    return FitTable(
        title=title,
        columns=tuple(columns),
        rows=tuple(tuple(str(c) for c in r) for r in rows),
        right_from=right_from,
        no_wrap=tuple(no_wrap),
        left=tuple(left),
        wide=wide,
    )


WRAP_FLOOR = 8  # a wrapping column is narrowed below this only when nothing else can give way


@dataclass(frozen=True, slots=True)
class FitTable:
    """The renderable `make_table` returns: column widths are chosen when it is printed, for the
    console's width (rich's own shrinking can crop the last column of a table of fixed columns)."""

    title: str | None
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    right_from: int
    no_wrap: tuple[int, ...]
    left: tuple[int, ...]
    wide: bool

    def __rich_console__(self, console: Any, options: Any) -> Any:
        yield self.table(None if self.wide else options.max_width)

    def widths(self, width: int) -> list[int]:
        """Column widths for a table `width` characters wide (one separator between columns)."""
        from rich.text import Text

        n = len(self.columns)
        plain = [[Text.from_markup(c).plain for c in r] for r in self.rows]  # markup has no width
        lines = [[ln for r in plain for ln in r[i].splitlines()] or [""] for i in range(n)]
        word = [max((len(w) for w in c.split()), default=1) for c in self.columns]
        natural = [max(len(self.columns[i]), *(len(x) for x in lines[i])) for i in range(n)]
        need = [max(word[i], *(len(x) for x in lines[i])) if i in self.no_wrap else word[i] for i in range(n)]
        widths = list(natural)
        excess = sum(widths) + n - 1 - width
        wrap = [i for i in range(n) if i not in self.no_wrap]
        keep = [i for i in range(n) if i in self.no_wrap]
        # give way in order: long wrapping values, then headers of fixed columns, then the rest
        for cols, floor in (
            (wrap, lambda i: max(need[i], WRAP_FLOOR)),
            (keep, need.__getitem__),
            (wrap, need.__getitem__),
        ):
            while excess > 0:
                slack = [(widths[i] - floor(i), i) for i in cols if widths[i] > floor(i)]
                if not slack:
                    break
                _, i = max(slack)
                widths[i] -= 1
                excess -= 1
        return widths

    def table(self, width: int | None) -> Any:
        from rich import box
        from rich.table import Table

        t = Table(
            title=self.title,
            box=box.SIMPLE_HEAD,
            pad_edge=False,
            show_edge=False,  # no outer edge columns: two more characters for values
            title_justify="left",
            padding=(0, 1) if width is None else 0,  # narrow: the one-space separator alone
            collapse_padding=True,
        )
        sizes = [None] * len(self.columns) if width is None else self.widths(width)
        for i, c in enumerate(self.columns):
            t.add_column(
                c,
                justify="right" if i >= self.right_from and i not in self.left else "left",
                no_wrap=width is None,
                overflow="fold",
                width=sizes[i],
            )
        for r in self.rows:
            t.add_row(*r)
        return t


def _config_cell(r: DesignResult) -> str:
    if not r.meets_slo:
        return "infeasible"
    return counts_label({k: getattr(r, k) for k in _COUNT_FIELDS})


_COUNT_FIELDS = (
    "machines",
    "instances",
    "prompt_machines",
    "token_machines",
    "prompt_instances",
    "token_instances",
    "prompt_tp",
    "token_tp",
)


def counts_label(c: Mapping[str, Any]) -> str:
    """A configuration's counts as the tables print them: `9P+3T` (`N=54` for a baseline, whose
    pool counts are None) in whole 8-GPU nodes, and instance counts with their TP (`6P×tp4+4T×tp2`)
    wherever an instance is less than a whole node, even where the counts equal the node counts
    (one TP4 instance on one node is half a node's price, not one machine)."""

    def tp(n: object) -> str:
        return "" if n is None or n == 8 else f"×tp{n}"

    if c.get("prompt_machines") is None:
        n = c.get("instances")
        if n is not None and (n != c.get("machines") or tp(c.get("prompt_tp"))):
            return f"N={n}{tp(c.get('prompt_tp'))}"
        return f"N={c.get('machines')}"
    pi, ti = c.get("prompt_instances"), c.get("token_instances")
    if pi is not None and (
        pi != c.get("prompt_machines")
        or ti != c.get("token_machines")
        or tp(c.get("prompt_tp"))
        or tp(c.get("token_tp"))
    ):
        return f"{pi}P{tp(c.get('prompt_tp'))}+{ti}T{tp(c.get('token_tp'))}"
    return f"{c.get('prompt_machines')}P+{c.get('token_machines')}T"


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


def search_table(outcome: SearchOutcome, *, wide: bool = False) -> Any:
    """One row per design: best configuration, cost, power, throughput, binding SLO, verified-by.

    Custom families add their pools (GPU and power cap) and instances (TP, precision) in one
    column, which wraps; a long design name is broken over lines unless `wide`."""
    best = outcome.best
    # paper designs say their pools in their names; show pools only for custom families
    show_pools = any(r.design.startswith("custom") for r in outcome.results)
    show_instances = not all(_paper_instances(r) for r in outcome.results)
    extra = show_pools or show_instances
    rows = []
    for r in outcome.results:
        star = " *" if best is not None and r is best else ""
        name = r.design + star
        pools = " ".join(
            x
            for x in ([_pools_cell(r)] if show_pools else [])
            + ([_instance_cell(r)] if show_instances else [])
        )
        row = (
            [name if wide else breakable(name)]
            + ([pools] if extra else [])
            + [
                _config_cell(r) if wide else breakable(_config_cell(r), CONFIG_WIDTH),
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
    head = (
        "pools"
        if show_pools and not show_instances
        else "instances"
        if not show_pools
        else "pools, instances"
    )
    columns = (
        ["design"]
        + ([head] if extra else [])
        + ["config", "$/h", "kW", "req/s", "binding", "headroom", "verified"]
    )
    first_number = 2 + int(extra)
    binding_col = len(columns) - 3
    keep = tuple(i for i in range(len(columns)) if i != binding_col and not (extra and i == 1))
    return make_table(title, columns, rows, right_from=first_number, no_wrap=keep, wide=wide)


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
    "latency": (
        "the machines' own latency: the largest configuration misses the SLOs even with requests "
        "arriving alone, so no count of these machines meets them (faster machines or other instances)"
    ),
}


def infeasible_line(r: DesignResult) -> str:
    """Why a design has no answer: its closest configuration, binding SLO, shortfall and limit."""
    head = f"No configuration of {r.design} meets all nine SLOs"
    c, sf = r.closest, r.shortfall or {}
    if c is None:
        return head + "." if r.limited_by is None else f"{head}; limited by {_LIMIT_HINT[r.limited_by]}."
    where = counts_label(c)
    slo = sf.get("slo") or "an SLO"  # a point only screened in aggregate names none
    if sf.get("unstable"):
        miss = "is overloaded (unstable)"
    elif sf.get("over_limit") is not None:
        miss = f"misses {slo} by {100 * float(sf['over_limit']):.0f}%"  # type: ignore[arg-type]
    else:
        miss = f"misses {slo}"
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
    if best is None:  # where each came closest is then the whole answer
        return "[bold red]No design meets all nine SLOs in the searched space.[/]" + note
    what = {
        "cost": f"${best.cost_usd_per_h:,.2f}/h",
        "power": f"{best.power_kw:,.1f} kW",
        "throughput": f"{fmt(best.rate_rps, '.1f')} req/s",
    }[outcome.objective]
    line = (
        f"[bold green]Winner:[/] {best.design} {_config_cell(best)} on {_pools_cell(best)} "
        f"({_instance_cell(best)}) at {what}"
    )
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
