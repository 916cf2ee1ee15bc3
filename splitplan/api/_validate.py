"""Checks of a search request at the boundary, before any work: every option takes effect exactly as
given or is refused with one line naming it.

- Count ranges are honoured exactly: a range beyond `--max-machines` is a conflict, not clipped,
  and `--max-machines` with every range given is refused (it tops only the ranges not given).
- `--token-range` and `--token-power-cap` need a design with a token pool.
- Budgets are positive finite numbers.
- Power caps given without custom pools apply to the named designs (a named design is a starting
  point), so `--design splitwise-hh --token-power-cap 0.5` searches H100 token machines at half power.
- A space too large to enumerate is refused; `--trials` beyond a finite space's size stops there.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, cast

from splitplan.errors import InputError

if TYPE_CHECKING:
    from splitplan.api._search import SearchRequest
    from splitplan.search import DesignSpace

MAX_GRID_POINTS = 1_000_000  # per design: far beyond any useful search, bounded memory and time


def check_search_request(req: SearchRequest) -> None:
    """Refuse conflicting, out-of-range or meaningless options of a search (see the module doc).

    The request is typed (its own `__post_init__` checked the types); messages name parameters in
    backticks, which the CLI rewrites as its flags.
    """
    from splitplan.design import get_design

    for name, v in (
        ("power_budget_kw", req.power_budget_kw),
        ("cost_budget_usd_per_h", req.cost_budget_usd_per_h),
    ):
        if v is not None and (
            isinstance(v, bool) or not isinstance(v, int | float) or not (math.isfinite(v) and v > 0)
        ):
            raise InputError(f"`{name}` must be a positive finite number, got {v!r}")
    if not (isinstance(req.trials, int) and not isinstance(req.trials, bool) and req.trials >= 1):
        raise InputError(f"`trials` must be a whole number ≥ 1, got {req.trials!r}")
    mm = req.max_machines
    custom = bool(req.prompt_gpus or req.token_gpus)
    named = [n.lower() for n in req.designs if not n.lower().startswith("custom")]
    if not req.designs and not custom:
        from splitplan.design import PAPER_DESIGNS

        named = list(PAPER_DESIGNS)
    kinds = [get_design(n).is_baseline for n in named]  # unknown names fail here, before any work
    custom_baseline = (
        custom and any(n.lower().startswith("baseline") for n in req.designs) and not req.token_gpus
    )
    has_split = (custom and not custom_baseline) or not all(kinds)
    if mm is not None and req.prompt_range is not None and (req.token_range is not None or not has_split):
        given = "`prompt_range` and `token_range` are" if req.token_range is not None else "`prompt_range` is"
        raise InputError(
            f"`max_machines` tops the count ranges that are not given, and {given} given: "
            "it would have no effect; give one or the other"
        )
    for name, r in (("prompt_range", req.prompt_range), ("token_range", req.token_range)):
        if r is None:
            continue
        text = f"{r[0]}:{r[1]}"
        if mm is not None and r[1] > mm:
            raise InputError(f"`{name}` {text} goes beyond `max_machines` {mm}; give one or the other")
        points = r[1] - r[0] + 1
        if points > MAX_GRID_POINTS:
            raise InputError(f"`{name}` {text} spans {points:,} counts; at most {MAX_GRID_POINTS:,} per pool")
    if req.token_range is not None and not has_split:
        raise InputError(
            "`token_range` needs a design with a token pool; baselines have one pool (`prompt_range`)"
        )
    from splitplan.api._search import cap_given

    if not custom and cap_given(req.token_power_cap) and not has_split:
        raise InputError("`token_power_cap` needs a design with a token pool; baselines have one pool")


def apply_named_caps(spaces: tuple[DesignSpace, ...], req: SearchRequest) -> tuple[DesignSpace, ...]:
    """Named designs with the request's power caps (only when no custom pools take the caps)."""

    if req.prompt_gpus or req.token_gpus:
        return spaces
    from splitplan.api._search import cap_given

    # (lo, hi) intervals after the request's own checks
    pc = cast("tuple[float, float]", req.prompt_power_cap) if cap_given(req.prompt_power_cap) else None
    tc = cast("tuple[float, float]", req.token_power_cap) if cap_given(req.token_power_cap) else None
    if pc is None and tc is None:
        return spaces
    out = []
    for s in spaces:
        prompt, token, parts = s.prompt, s.token, []
        if pc is not None:
            prompt = replace(prompt, power_cap=pc)
            parts.append(f"prompt@{_cap_text(pc)}")
        if s.baseline:
            token = prompt
        elif tc is not None:
            token = replace(token, power_cap=tc)
            parts.append(f"token@{_cap_text(tc)}")
        if prompt == s.prompt and token == s.token:
            out.append(s)
        else:
            out.append(replace(s, name=f"{s.name}:{','.join(parts)}", prompt=prompt, token=token))
    return tuple(out)


def _cap_text(cap: tuple[float, float]) -> str:
    lo, hi = cap
    return f"{lo:g}" if lo == hi else f"{lo:g}-{hi:g}"


def space_size(space: DesignSpace) -> float:
    """Distinct configurations of a space (inf when a power cap is a continuous interval)."""
    if space.prompt.power_cap[0] < space.prompt.power_cap[1]:
        return math.inf
    if not space.baseline and space.token.power_cap[0] < space.token.power_cap[1]:
        return math.inf
    counts = space.prompt_range[1] - space.prompt_range[0] + 1
    gpus = len(space.prompt.gpus)
    if not space.baseline:
        counts *= space.token_range[1] - space.token_range[0] + 1
        gpus *= len(space.token.gpus)
    return float(counts * gpus)


def check_spaces(spaces: tuple[DesignSpace, ...], *, max_machines: int | None = None) -> None:
    """Refuse a space too large to enumerate, naming what sized it: the ranges, or `max_machines`
    (which tops every range not given, so a huge value would size a grid of that many counts)."""
    fix = "narrow `prompt_range`/`token_range`" + ("" if max_machines is None else " or lower `max_machines`")
    for s in spaces:
        n = (s.prompt_range[1] - s.prompt_range[0] + 1) * (
            1 if s.baseline else s.token_range[1] - s.token_range[0] + 1
        )
        if n > MAX_GRID_POINTS:
            what = "machine counts" if s.baseline else "(prompt, token) configurations"
            raise InputError(f"{s.name}: {n:,} {what}; at most {MAX_GRID_POINTS:,} per design ({fix})")


def grid_points(spaces: tuple[DesignSpace, ...]) -> float:
    return float(
        sum(
            (s.prompt_range[1] - s.prompt_range[0] + 1)
            * (1 if s.baseline else s.token_range[1] - s.token_range[0] + 1)
            for s in spaces
        )
    )
