"""Random streams (below every layer): passed in, never global, reproducible across processes."""

from __future__ import annotations

import numpy as np


def make_rng(seed: int | np.random.SeedSequence | None) -> np.random.Generator:
    """A Generator from an int seed (None → 0, so runs are reproducible by default)."""
    return np.random.default_rng(0 if seed is None else seed)


def spawn(seed: int, n: int) -> list[np.random.Generator]:
    """`n` independent streams for parallel chunks; identical whatever the worker count."""
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(n)]
