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
        for what in ("slowdown", "latency_s"):
            limits = getattr(self, what)
            # a string or a list would reach dict() and fail as a ValueError/TypeError about
            # "update sequences": refused here by name
            if not isinstance(limits, Mapping):
                raise InputError(f"SLO: `{what}` must be a table of SLO key → limit, got {limits!r}")
            object.__setattr__(self, what, _check_limits(dict(limits), what, "SLO"))


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


def row_percentiles(
    values: npt.NDArray[np.float64], pcts: tuple[float, ...], *, overwrite: bool = False
) -> npt.NDArray[np.float64]:
    """Percentiles along the last axis by numpy's linear method, from one selection per percentile
    on a shrinking tail: shape (len(pcts), *values.shape[:-1]).

    np.percentile partitions at every neighbouring rank at once, which costs several times one
    partition (a DES result of 360k requests took its eighteen percentiles in ~45 ms that way,
    ~10 ms here), and it is slower still on many short rows. From the lowest percentile up, each
    selection partitions only what lies above the last pivot (a row of 501 at P50 / P90 / P99:
    501 + 250 + 50 values, where the highest first partitions 501 + 495 + 450, twice the time);
    a percentile's upper neighbour is the least value between its rank and the next pivot. The
    arithmetic is numpy's verbatim — virtual index (n − 1)·q, its floor and fraction γ, and
    a + (b − a)·γ, or b − (b − a)·(1 − γ) where γ ≥ ½ — save where numpy's makes a NaN of
    infinities: at a whole rank (γ = 0) the percentile is that rank's value, and between two
    equal values it is that value (numpy: inf · 0 and inf − inf; a DES's unfinished requests and
    an unstable point's latencies are infinite). A NaN ranks last, above every value, where
    np.percentile propagates it (`percentiles` hands an array with one to np.percentile).
    `overwrite`: partition `values` in place (a caller done with them saves the copy)."""
    n = values.shape[-1]
    part = values if overwrite else values.copy()
    virtual = np.asarray(pcts, dtype=np.float64) / 100.0 * (n - 1)
    ranks = np.floor(virtual).astype(np.intp)
    gamma = virtual - ranks
    pivots = np.unique(ranks)  # ascending
    start = 0  # part holds the order statistics from rank `start` on in its tail
    for k in pivots.tolist():
        part[..., start:].partition(k - start, axis=-1)
        start = k + 1
    out = np.empty((len(virtual), *values.shape[:-1]), dtype=np.float64)
    for j, k in enumerate(ranks.tolist()):
        a = part[..., k]
        if gamma[j] == 0.0:
            out[j] = a
            continue
        above = pivots[pivots > k]  # rank k + 1: the least of what lies up to the next pivot
        b = np.fmin.reduce(part[..., k + 1 : int(above[0]) + 1 if len(above) else n], axis=-1)
        with np.errstate(invalid="ignore", over="ignore"):  # ±inf where numpy's own gives it
            diff = b - a
            lerp = a + diff * gamma[j] if gamma[j] < 0.5 else b - diff * (1.0 - gamma[j])
            out[j] = np.where(a == b, a, lerp)
    return out


def percentiles(
    ttft: npt.ArrayLike, tbt: npt.ArrayLike, e2e: npt.ArrayLike, axis: int = -1
) -> dict[str, Any]:
    """The nine percentile values keyed like SLO_KEYS (floats; arrays when inputs are 2-D)."""
    out: dict[str, Any] = {}
    for name, values in zip(METRICS, (ttft, tbt, e2e), strict=True):
        v = np.asarray(values, dtype=np.float64)
        if v.ndim == 1 and len(v) and not np.isnan(v).any():
            q = row_percentiles(v, PERCENTILES)
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
