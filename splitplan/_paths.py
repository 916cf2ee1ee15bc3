"""Where the shipped data lives: `splitplan/_data` in a wheel, the repository's `data/` in a checkout."""

from __future__ import annotations

from functools import cache
from pathlib import Path


@cache
def data_dir() -> Path:
    here = Path(__file__).resolve().parent
    for candidate in (here / "_data", here.parent / "data"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("splitplan data directory not found (broken installation)")
