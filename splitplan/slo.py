"""Layer 3: the nine latency SLOs (SPLITWISE.md §6) — slowdown percentiles and the verdict.

Slowdown of a request = its latency ÷ the same request's latency alone on the reference machine
(a DGX-A100 running the same model): TTFT_ref = prompt time of p, TBT_ref = one decode alone,
E2E_ref = TTFT_ref + TBT_ref · (o − 1). Percentiles over requests, numpy's linear method.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from splitplan.errors import InputError
from splitplan.perf.base import PerfModel

METRICS = ("ttft", "tbt", "e2e")
PERCENTILES = (50, 90, 99)
SLO_KEYS = tuple(f"{m}_p{q}" for m in METRICS for q in PERCENTILES)
# The nine latency percentiles in seconds, as output columns: `ttft_p99` → `ttft_p99_s` (the
# per-request files name a request's latencies `ttft_s`, `tbt_s`, `e2e_s`; the suffix is the unit).
LATENCY_COLUMNS = tuple(f"{k}_s" for k in SLO_KEYS)

# Table VI of the paper.
DEFAULT_SLOWDOWN_LIMITS: dict[str, float] = {
    "ttft_p50": 2.0,
    "ttft_p90": 3.0,
    "ttft_p99": 6.0,
    "tbt_p50": 1.25,
    "tbt_p90": 1.5,
    "tbt_p99": 5.0,
    "e2e_p50": 1.25,
    "e2e_p90": 1.5,
    "e2e_p99": 5.0,
}


# What the field also calls TBT (time between tokens): TPOT (time per output token), ITL
# (inter-token latency). Accepted in SLO files and flags, stored under the tbt_* keys.
TBT_ALIASES = ("tpot", "itl")


def canonical_slo_key(key: str) -> str:
    """`tpot_p99` / `itl_p99` → `tbt_p99`; every other key unchanged."""
    metric, sep, rest = str(key).partition("_")
    return f"tbt_{rest}" if sep and metric.lower() in TBT_ALIASES else str(key)


def _check_limits(limits: dict[str, object], what: str, source: str) -> dict[str, float]:
    out: dict[str, float] = {}
    seen: dict[str, str] = {}
    for given, value in limits.items():
        key = canonical_slo_key(given)
        if key in seen:
            raise InputError(f"{source}: {what} keys {seen[key]!r} and {given!r} name the same SLO")
        seen[key] = given
        if key not in SLO_KEYS:
            raise InputError(
                f"{source}: unknown {what} key {given!r} "
                f"(expected {', '.join(SLO_KEYS)}; tpot_/itl_ name tbt_)"
            )
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputError(f"{source}: {what}.{key} must be a number, got {value!r}")
        if not (math.isfinite(value) and value > 0):
            raise InputError(f"{source}: {what}.{key} must be a positive number, got {value!r}")
        out[key] = float(value)
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class SloSpec:
    """Limits on the nine slowdown percentiles, plus optional absolute latency limits (seconds)."""

    slowdown: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_SLOWDOWN_LIMITS))
    latency_s: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "slowdown", _check_limits(dict(self.slowdown), "slowdown", "SLO"))
        object.__setattr__(self, "latency_s", _check_limits(dict(self.latency_s), "latency_s", "SLO"))


def load_slo(path: str | Path | SloSpec | None) -> SloSpec:
    """Read an SLO TOML file: `[slowdown]` overrides Table VI keys, `[latency_s]` adds limits.

    A SloSpec passes through (limits already resolved, e.g. a file plus command-line overrides)."""
    if isinstance(path, SloSpec):
        return path
    if path is None:
        return SloSpec()
    p = Path(path)
    from splitplan._io import read_text_file

    text = read_text_file(p, "SLO file")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"SLO file {p} is not valid TOML: {exc}") from None
    unknown = set(doc) - {"slowdown", "latency_s"}
    if unknown:
        raise InputError(f"SLO file {p}: unknown section(s) {', '.join(sorted(unknown))}")
    for section in ("slowdown", "latency_s"):
        if section in doc and not isinstance(doc[section], dict):
            raise InputError(f"SLO file {p}: [{section}] must be a table")
    slowdown = dict(DEFAULT_SLOWDOWN_LIMITS)
    slowdown.update(_check_limits(doc.get("slowdown", {}), "slowdown", str(p)))
    latency = _check_limits(doc.get("latency_s", {}), "latency_s", str(p))
    return SloSpec(slowdown=slowdown, latency_s=latency)


def reference_latencies(
    ref: PerfModel, prompt_tokens: npt.ArrayLike, output_tokens: npt.ArrayLike
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(TTFT_ref, TBT_ref, E2E_ref) per request, alone on the reference machine."""
    p = np.asarray(prompt_tokens, dtype=np.float64)
    o = np.asarray(output_tokens, dtype=np.float64)
    ttft = ref.prompt_time_s(p)
    tbt = ref.decode_alone_time_s(p)
    return ttft, tbt, ttft + tbt * (o - 1.0)


def _linear_percentiles(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """np.percentile(values, PERCENTILES) of a 1-D array of two or more values without NaN, to the
    bit, from one partition per percentile on a shrinking tail.

    numpy partitions once at all six neighbouring ranks, which costs several times one partition
    (a DES result of 360k requests takes its eighteen percentiles in ~45 ms that way, ~10 ms
    here). The arithmetic is numpy's linear method verbatim: virtual index (n − 1)·q, its floor and
    fraction γ, and a + (b − a)·γ, or b − (b − a)·(1 − γ) where γ ≥ ½."""
    n = len(values)
    qs = np.true_divide(np.asarray(PERCENTILES), 100)
    virtual = (n - 1) * qs
    prev = np.floor(virtual)
    gamma = virtual - prev
    ranks = prev.astype(np.intp)  # ascending, each below n − 1 (every q < 100)
    a = np.empty(len(ranks))
    b = np.empty(len(ranks))
    tail = values.copy()
    start = 0  # tail holds the order statistics from rank `start` on
    for i, k in enumerate(ranks.tolist()):
        if k < start:  # the same rank as the previous percentile's (a short array)
            a[i], b[i] = a[i - 1], b[i - 1]
            continue
        j = k - start
        tail.partition(j)
        a[i] = tail[j]
        tail = tail[j + 1 :]
        start = k + 1
        b[i] = tail.min()  # rank k + 1: the least of what lies above rank k
    diff = b - a
    out = a + diff * gamma
    np.subtract(b, diff * (1 - gamma), out=out, where=gamma >= 0.5)
    return out


def percentiles(
    ttft: npt.ArrayLike, tbt: npt.ArrayLike, e2e: npt.ArrayLike, axis: int = -1
) -> dict[str, Any]:
    """The nine percentile values keyed like SLO_KEYS (floats; arrays when inputs are 2-D)."""
    out: dict[str, Any] = {}
    for name, values in zip(METRICS, (ttft, tbt, e2e), strict=True):
        v = np.asarray(values, dtype=np.float64)
        if v.ndim == 1 and len(v) >= 2 and not np.isnan(v).any():
            q = _linear_percentiles(v)
        else:
            q = np.percentile(v, PERCENTILES, axis=axis)
        for i, pct in enumerate(PERCENTILES):
            out[f"{name}_p{pct}"] = q[i] if np.ndim(q[i]) else float(q[i])
    return out


def headroom(limit: float | npt.ArrayLike, value: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Relative headroom of a value under its limit, limit / value − 1 (negative: violated).

    The one rule for the edges, used everywhere a verdict is made:
    - value 0 → +inf (nothing is faster than instant; it meets any positive limit);
    - NaN (a request never served), +inf and negative values → −inf (fails any limit).
    """
    v = np.asarray(value, dtype=np.float64)
    lim = np.asarray(limit, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        h = lim / v - 1.0
    h = np.where(v == 0.0, np.inf, h)
    return np.where(np.isfinite(v) & (v >= 0.0), h, -np.inf)


def limit_names(spec: SloSpec) -> tuple[str, ...]:
    """Names of the limits of `spec` in verdict order: slowdown keys, then `<key>_latency`."""
    return tuple(spec.slowdown) + tuple(f"{k}_latency" for k in spec.latency_s)


@dataclass(frozen=True, slots=True)
class SloMargins:
    """Per point: the least headroom over every limit, and the limit that has it."""

    margin: npt.NDArray[np.float64]  # (n,) −inf when unstable or a binding value is NaN/inf
    binding: npt.NDArray[np.str_]  # (n,) slowdown key (`ttft_p99`) or latency name (`ttft_p99_latency`)

    @property
    def meets(self) -> npt.NDArray[np.bool_]:
        return self.margin >= 0.0


def slo_margins(
    spec: SloSpec,
    slowdown: Mapping[str, npt.ArrayLike],
    latency_s: Mapping[str, npt.ArrayLike],
    stable: npt.ArrayLike | None = None,
) -> SloMargins:
    """The SLO margin of n points: min over slowdown *and* absolute-latency limits of `headroom`.

    Values are scalars or (n,) arrays keyed like SLO_KEYS. Ties go to the first limit in
    `limit_names` order. `stable` False forces the margin to −inf (an unbounded backlog fails
    whatever its finite-trace percentiles say) and keeps the binding name of the SLOs.
    """
    names = limit_names(spec)
    rows = [headroom(lim, slowdown[k]) for k, lim in spec.slowdown.items()]
    rows += [headroom(lim, latency_s[k]) for k, lim in spec.latency_s.items()]
    if not rows:
        n = np.broadcast(*(np.asarray(v) for v in slowdown.values())).size if slowdown else 1
        return SloMargins(margin=np.full(n, np.inf), binding=np.full(n, "", dtype="<U1"))
    head = np.atleast_2d(np.stack(np.broadcast_arrays(*rows)).reshape(len(rows), -1))
    which = np.argmin(head, axis=0)
    margin = head[which, np.arange(head.shape[1])]
    if stable is not None:
        margin = np.where(np.asarray(stable, dtype=bool), margin, -np.inf)
    return SloMargins(margin=margin.astype(np.float64), binding=np.asarray(names)[which])


@dataclass(frozen=True, slots=True)
class SloVerdict:
    meets: bool
    binding: str  # the SLO with least headroom (most violated when failing)
    headroom: float  # limit / value − 1 of the binding SLO (negative when violated)


def verdict(spec: SloSpec, slowdown: Mapping[str, float], latency_s: Mapping[str, float]) -> SloVerdict:
    """All-SLO verdict of one point (`slo_margins` of one point; NaN/inf values fail)."""
    m = slo_margins(spec, slowdown, latency_s)
    h = float(m.margin[0])
    return SloVerdict(meets=h >= 0.0, binding=str(m.binding[0]), headroom=h)
