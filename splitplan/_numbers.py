"""What counts as a number in a user's value, below every layer: one rule for every boundary check."""

from __future__ import annotations

import numpy as np


def is_number(value: object) -> bool:
    """A real number, numpy's included. Not a bool: True is no rate, and Python counts it as 1.
    Not a numeric string: "2" is refused by name, never coerced, so a request file or a library
    call means what it says."""
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)
