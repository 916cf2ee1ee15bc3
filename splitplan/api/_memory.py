"""Peak-memory estimate of a run, checked before any work against a budget (`--max-memory`).

A run that would exhaust the machine's memory is refused with one line instead of being killed by
the kernel minutes later. The per-request figures were measured with `/usr/bin/time -v` (maximum
resident set size) as the slope between two workload sizes, e.g. for the baseline screen
`/usr/bin/time -v splitplan search --design baseline-h100 --engine analytic --rate R --duration 100`
with R = 1000 and 2000 (676 MB and 1,284 MB), and for the DES
`splitplan simulate --design splitwise-hh --prompt 39 --token 39 --rate R --duration 100` with R = 2000
and 4000 (225 MB and 267 MB):

- the analytic screen of a baseline design holds ~6.1 KB per request of the workload (split designs
  work on a fixed sample of requests);
- one discrete-event simulation holds ~0.22 KB per request, and each parallel job runs its own;
- the workload itself is three 8-byte columns, plus their copies while it is built (~0.1 KB).
"""

from __future__ import annotations

import math
import os
import re
from typing import Any

from splitplan.errors import InputError

BASE_BYTES = 350e6  # interpreter, numpy/numba/pyarrow, compiled kernels
WORKLOAD_BYTES_PER_REQUEST = 100.0
DES_BYTES_PER_REQUEST = 220.0
BASELINE_SCREEN_BYTES_PER_REQUEST = 6_100.0
GRID_BYTES_PER_POINT = 2_000.0  # a search grid's per-point screen arrays, verdicts and records
DEFAULT_RAM_FRACTION = 0.5

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmMgGtT]?)(i?[bB])?\s*$")
_UNITS = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_IUNITS = {"": 1.0, "k": 2.0**10, "m": 2.0**20, "g": 2.0**30, "t": 2.0**40}


def total_ram_bytes() -> float:
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 8e9


def parse_memory(text: str | None) -> float:
    """`--max-memory`: "4GB", "512M", "2GiB", a byte count, or None (half the machine's RAM)."""
    if text is None:
        return DEFAULT_RAM_FRACTION * total_ram_bytes()
    m = _SIZE.match(str(text))
    if not m:
        raise InputError(f"`max_memory` must be a size like 4GB, 512MB or 2GiB, got {text!r}")
    value, unit, suffix = float(m.group(1)), m.group(2).lower(), m.group(3) or ""
    scale = _IUNITS[unit] if suffix.lower() == "ib" else _UNITS[unit]
    size = value * scale
    if not (math.isfinite(size) and size >= 1e6):
        raise InputError(f"`max_memory` must be at least 1MB, got {text!r}")
    return size


def expected_requests(rate_rps: float | None, duration_s: float | None) -> float | None:
    """Requests a generated workload will hold (None when the trace decides)."""
    if rate_rps is None or duration_s is None:
        return None
    return float(rate_rps) * float(duration_s)


def estimate_bytes(
    requests: float, *, des_jobs: int = 0, baseline_screen: bool = False, grid_points: float = 0.0
) -> float:
    """Peak resident memory of a run over `requests` requests (see the module doc)."""
    per_request = WORKLOAD_BYTES_PER_REQUEST + DES_BYTES_PER_REQUEST * max(des_jobs, 0)
    if baseline_screen:
        per_request += BASELINE_SCREEN_BYTES_PER_REQUEST
    return BASE_BYTES + requests * per_request + grid_points * GRID_BYTES_PER_POINT


def check_memory(estimate: float, budget: float, what: str, advice: str) -> None:
    """InputError (one line) when `estimate` exceeds `budget`."""
    if estimate > budget:
        raise InputError(
            f"{what} needs an estimated {_gb(estimate)} of memory, above the budget of {_gb(budget)} "
            f"(`max_memory`); {advice}"
        )


def _gb(n: float) -> str:
    return f"{n / 1e9:,.1f} GB" if n < 1e15 else f"{n / 1e12:,.3g} TB"


def check_requests_memory(
    n_requests: float | None, budget: float, what: str, *, replayed: bool, **estimate: Any
) -> None:
    """The memory check of a run over `n_requests` (None: not known yet, nothing to check), with
    the advice that fits where the requests come from: a replayed trace or a generated workload."""
    if n_requests is None:
        return
    advice = "replay a shorter trace" if replayed else "lower `rate` or `duration`"
    check_memory(estimate_bytes(n_requests, **estimate), budget, f"{what} {n_requests:,.0f} requests", advice)
