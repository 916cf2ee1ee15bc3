"""Layer 5: what a search optimizes — the objective's score, its direction and the one tie-break.

Every strategy (cost grid, throughput search, Optuna), the search result and the heatmap rank
points with `rank_key` / `best_index`, so "the best point" means one thing everywhere: the best
score in the objective's direction, then lower cost, then lower power, then fewer machines, then
fewer prompt machines (a baseline's machines all run prompts). Scores are compared rounded to
1e-9 so sums of list prices that are equal in exact arithmetic tie.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, TypeVar

import numpy as np
import numpy.typing as npt

from splitplan.errors import InputError

FloatArray = npt.NDArray[np.float64]
_DIGITS = 9
E = TypeVar("E", bound=StrEnum)


class Objective(StrEnum):
    COST = "cost"
    POWER = "power"
    THROUGHPUT = "throughput"

    @property
    def maximize(self) -> bool:
        return self is Objective.THROUGHPUT

    @property
    def direction(self) -> Literal["minimize", "maximize"]:
        """Optuna's word for it."""
        return "maximize" if self.maximize else "minimize"

    def score(
        self, cost: npt.ArrayLike, power: npt.ArrayLike, rate: npt.ArrayLike | None = None
    ) -> FloatArray:
        """The value this objective optimizes ($/h, kW or req/s)."""
        if self is Objective.COST:
            return np.asarray(cost, dtype=np.float64)
        if self is Objective.POWER:
            return np.asarray(power, dtype=np.float64)
        if rate is None:
            raise ValueError("the throughput objective scores a rate")
        return np.asarray(rate, dtype=np.float64)


class Engine(StrEnum):
    """How a search decides points: analytic screen + DES (hybrid), the screen alone, the DES alone."""

    HYBRID = "hybrid"
    ANALYTIC = "analytic"
    DES = "des"


class NamedBudget(StrEnum):
    """The paper's budgets: the power or the cost of 40 DGX-H100 machines (search.problem)."""

    ISO_POWER = "iso-power"
    ISO_COST = "iso-cost"


class Method(StrEnum):
    AUTO = "auto"
    GRID = "grid"
    OPTUNA = "optuna"


def parse_enum(kind: type[E], value: object, what: str) -> E:
    """`value` as a member of `kind` (members and their strings accepted); InputError naming `what`."""
    try:
        return kind(value)  # type: ignore[arg-type]
    except ValueError:
        known = ", ".join(m.value for m in kind)
        raise InputError(f"{what} must be one of {known}, got {value!r}") from None


def rank_key(
    objective: Objective, *, cost: float, power: float, rate: float, machines: int, prompt: int
) -> tuple[float, float, float, int, int]:
    """Sort key of one point (smaller is better) — the one tie-break rule."""
    s = float(objective.score(cost, power, rate))
    return (
        round(-s if objective.maximize else s, _DIGITS),
        round(float(cost), _DIGITS),
        round(float(power), _DIGITS),
        int(machines),
        int(prompt),
    )


def rank_order(
    objective: Objective,
    *,
    cost: npt.ArrayLike,
    power: npt.ArrayLike,
    rate: npt.ArrayLike | None,
    machines: npt.ArrayLike,
    prompt: npt.ArrayLike,
) -> npt.NDArray[np.intp]:
    """Indices of the points best first (`rank_key` order; stable among exact ties)."""
    cost_a = np.asarray(cost, dtype=np.float64)
    rate_a = (
        np.zeros_like(cost_a) if rate is None else np.broadcast_to(np.asarray(rate, np.float64), cost_a.shape)
    )
    s = objective.score(cost_a, power, rate_a)
    primary = np.round(-s if objective.maximize else s, _DIGITS)
    keys = (
        np.asarray(prompt),
        np.asarray(machines),
        np.round(np.asarray(power, dtype=np.float64), _DIGITS),
        np.round(cost_a, _DIGITS),
        primary,
    )
    return np.lexsort(keys)


def best_index(
    objective: Objective,
    ok: npt.ArrayLike,
    *,
    cost: npt.ArrayLike,
    power: npt.ArrayLike,
    rate: npt.ArrayLike | None = None,
    machines: npt.ArrayLike,
    prompt: npt.ArrayLike,
) -> int | None:
    """Index of the best point among those with `ok` true, or None when there is none."""
    cand = np.flatnonzero(np.asarray(ok, dtype=bool))
    if not len(cand):
        return None

    def pick(a: npt.ArrayLike | None) -> npt.ArrayLike | None:
        return None if a is None else np.broadcast_to(np.asarray(a), np.shape(ok))[cand]

    order = rank_order(
        objective,
        cost=pick(cost),  # type: ignore[arg-type]
        power=pick(power),  # type: ignore[arg-type]
        rate=pick(rate),
        machines=pick(machines),  # type: ignore[arg-type]
        prompt=pick(prompt),  # type: ignore[arg-type]
    )
    return int(cand[order[0]])


__all__ = ["Engine", "Method", "Objective", "best_index", "parse_enum", "rank_key", "rank_order"]
