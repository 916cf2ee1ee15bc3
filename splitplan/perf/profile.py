"""Layer 2: the profile performance model — interpolates a measured per-iteration table.

Semantics follow the reference simulator so that results compare like for like: per (model,
hardware, TP) the median prompt_time and token_time per "batch tokens" = prompt_size × batch_size,
linear interpolation inside and linear extrapolation beyond both ends. An all-decode iteration is
looked up at the number of decodes, a mixed iteration on the prompt curve at (prompt tokens +
decodes) × 1.1, and a request's decode alone at its context length.

Prompt curves. The reference pools every row into one prompt curve (`prompt_curves="pooled"`),
which merges, say, one 8192-token prompt with sixteen 512-token prompts: on the shared table those
differ by up to 35 %, and the pooled median sits between them. The default, `"by-count"`, keeps
the reference's median-and-interpolate rule but draws two curves: a lone prompt is timed on the
rows measured with batch_size = 1, a batch of several prompts on the rows with batch_size ≥ 2.
Below the first batched point the batched curve is the single-prompt curve scaled to meet it,
rather than a steep linear extrapolation towards zero. Mixed iterations keep the reference's rule
on the pooled curve: the table measures none, so there is nothing to split them by. A table
without two distinct batch-token values on each side falls back to the pooled curve.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import numpy.typing as npt

from splitplan.catalog import Machine, ModelSpec
from splitplan.errors import InputError
from splitplan.perf.base import FloatArray, prompt_cap_factor, token_cap_factor

PROFILE_COLUMNS = (
    "model",
    "hardware",
    "prompt_size",
    "batch_size",
    "token_size",
    "prompt_time",
    "token_time",
    "tensor_parallel",
)
MIXED_FACTOR = 1.1
PROMPT_CURVES = ("by-count", "pooled")


@dataclass(frozen=True, slots=True)
class ProfileTable:
    """Columnar profile rows; times in seconds."""

    path: str
    model: npt.NDArray[np.str_]
    hardware: npt.NDArray[np.str_]
    tensor_parallel: npt.NDArray[np.int64]
    prompt_size: npt.NDArray[np.int64]
    batch_size: npt.NDArray[np.int64]
    token_size: npt.NDArray[np.int64]
    prompt_time_s: FloatArray
    token_time_s: FloatArray

    def groups(self) -> list[tuple[str, str, int]]:
        keys = {
            (str(m), str(h), int(t))
            for m, h, t in zip(self.model, self.hardware, self.tensor_parallel, strict=True)
        }
        return sorted(keys)

    def mask(self, model: str, hardware: str, tensor_parallel: int) -> npt.NDArray[np.bool_]:
        return (self.model == model) & (self.hardware == hardware) & (self.tensor_parallel == tensor_parallel)

    def subset(self, mask: npt.NDArray[np.bool_]) -> ProfileTable:
        return ProfileTable(self.path, *(getattr(self, f)[mask] for f in _ARRAY_FIELDS))


_ARRAY_FIELDS = (
    "model",
    "hardware",
    "tensor_parallel",
    "prompt_size",
    "batch_size",
    "token_size",
    "prompt_time_s",
    "token_time_s",
)


@cache
def read_profile(path: str | Path) -> ProfileTable:
    """Read and validate a profile CSV (times in milliseconds, as the reference's table)."""
    p = Path(path)
    from splitplan._io import read_text_file

    text = read_text_file(p, "profile")
    reader = csv.reader(text.splitlines())
    header = next(reader, None)
    if not header:
        raise InputError(f"profile {p} is empty")
    header = [h.strip() for h in header]
    missing = [c for c in PROFILE_COLUMNS if c not in header]
    if missing:
        raise InputError(f"profile {p}: missing column(s) {', '.join(missing)}")
    idx = {c: header.index(c) for c in PROFILE_COLUMNS}
    cols: dict[str, list[object]] = {c: [] for c in PROFILE_COLUMNS}
    for lineno, row in enumerate(reader, start=2):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) < len(header):
            raise InputError(f"{p}:{lineno}: expected {len(header)} fields, got {len(row)}")
        c = ""
        try:
            for c in ("model", "hardware"):
                cols[c].append(row[idx[c]].strip())
            for c in ("prompt_size", "batch_size", "token_size", "tensor_parallel"):
                v = int(row[idx[c]])
                if v <= 0:
                    raise ValueError("must be a positive integer")
                cols[c].append(v)
            for c in ("prompt_time", "token_time"):
                x = float(row[idx[c]])
                if not (np.isfinite(x) and x > 0):
                    raise ValueError("must be a positive number")
                cols[c].append(x / 1000.0)
        except ValueError as exc:
            raise InputError(f"{p}:{lineno}: {c} {row[idx[c]].strip()!r}: {exc}") from None
    if not cols["model"]:
        raise InputError(f"profile {p} has no data rows")
    return ProfileTable(
        str(p),
        np.array(cols["model"]),
        np.array(cols["hardware"]),
        np.array(cols["tensor_parallel"], dtype=np.int64),
        np.array(cols["prompt_size"], dtype=np.int64),
        np.array(cols["batch_size"], dtype=np.int64),
        np.array(cols["token_size"], dtype=np.int64),
        np.array(cols["prompt_time"], dtype=np.float64),
        np.array(cols["token_time"], dtype=np.float64),
    )


def median_curve(x: npt.ArrayLike, y: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Median y per distinct x (sorted), as the reference groups rows by batch tokens."""
    xs = np.asarray(x, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    ux = np.unique(xs)
    return ux, np.array([np.median(ys[xs == v]) for v in ux])


def interp_extrap(x: npt.ArrayLike, xp: FloatArray, fp: FloatArray) -> FloatArray:
    """Linear interpolation with linear extrapolation beyond both ends (scipy's 'extrapolate')."""
    xq = np.asarray(x, dtype=np.float64)
    if len(xp) == 1:
        return np.full(xq.shape, fp[0])
    out = np.array(np.interp(xq, xp, fp), dtype=np.float64, ndmin=1).reshape(xq.shape)
    lo = xq < xp[0]
    hi = xq > xp[-1]
    if np.any(lo):
        out[lo] = fp[0] + (xq[lo] - xp[0]) * (fp[1] - fp[0]) / (xp[1] - xp[0])
    if np.any(hi):
        out[hi] = fp[-1] + (xq[hi] - xp[-1]) * (fp[-1] - fp[-2]) / (xp[-1] - xp[-2])
    return out if out.ndim else out[()]


# The reference labels the capped H100 as its own hardware; we map caps onto these names.
HARDWARE_ALIASES = {"dgx-a100": "a100-80gb", "dgx-h100": "h100-80gb"}
CAPPED_SUFFIX = "-pcap"
CAPPED_POWER = 0.7


class ProfilePerfModel:
    """Interpolates a profile table for one (model, machine, power cap)."""

    kind = "profile"
    calibrated = True

    def __init__(
        self, table: ProfileTable, model: ModelSpec, machine: Machine, prompt_curves: str = "by-count"
    ) -> None:
        if prompt_curves not in PROMPT_CURVES:
            raise InputError(f"unknown prompt_curves {prompt_curves!r} (expected by-count or pooled)")
        self.model = model
        self.machine = machine
        self.prompt_curves = prompt_curves
        hw = HARDWARE_ALIASES.get(machine.type.name, machine.type.gpu.name)
        tp = machine.type.tensor_parallel
        prompt_scale = token_scale = 1.0
        capped = abs(machine.power_cap - CAPPED_POWER) < 1e-9
        mask = table.mask(model.name, hw + CAPPED_SUFFIX, tp) if capped else None
        if mask is None or not mask.any():
            mask = table.mask(model.name, hw, tp)
            if machine.power_cap < 1.0:
                prompt_scale = prompt_cap_factor(machine.power_cap)
                token_scale = token_cap_factor(machine.power_cap)
        if not mask.any():
            raise InputError(f"profile {table.path} has no rows for model {model.name!r} on {hw!r} at TP{tp}")
        rows = table.subset(mask)
        batch_tokens = rows.prompt_size * rows.batch_size
        self._pooled = median_curve(batch_tokens, rows.prompt_time_s * prompt_scale)
        self._tx, ty = median_curve(batch_tokens, rows.token_time_s)
        self._ty = ty * token_scale
        self._single = self._batched = self._pooled
        lone = rows.batch_size == 1
        # each curve needs two batch-token points to interpolate; otherwise the pooled one serves
        if prompt_curves == "by-count" and all(len(np.unique(batch_tokens[m])) >= 2 for m in (lone, ~lone)):
            self._single = median_curve(batch_tokens[lone], rows.prompt_time_s[lone] * prompt_scale)
            self._batched = median_curve(batch_tokens[~lone], rows.prompt_time_s[~lone] * prompt_scale)

    def prompt_time_s(self, tokens: npt.ArrayLike, prompts: npt.ArrayLike = 1) -> FloatArray:
        n = np.asarray(tokens, dtype=np.float64)
        single = interp_extrap(n, *self._single)
        if self._batched is self._single:
            return single
        k = np.asarray(prompts)
        if not np.any(k > 1):
            return np.broadcast_to(single, np.broadcast_shapes(n.shape, k.shape)).copy()
        bx, by = self._batched
        # below the first batched point: the single-prompt curve, scaled to meet the batched one
        below = single * (by[0] / interp_extrap(bx[0], *self._single))
        batched = np.where(n < bx[0], below, interp_extrap(n, bx, by))
        return np.asarray(np.where(k > 1, batched, single), dtype=np.float64)

    def token_time_s(self, batch: npt.ArrayLike, context: npt.ArrayLike) -> FloatArray:
        b = np.asarray(batch, dtype=np.float64)
        out = interp_extrap(b, self._tx, self._ty)
        return np.broadcast_to(out, np.broadcast_shapes(b.shape, np.shape(context))).copy()

    def mixed_time_s(self, batch_tokens: npt.ArrayLike, context: npt.ArrayLike) -> FloatArray:
        n = np.asarray(batch_tokens, dtype=np.float64)
        out = interp_extrap(n, *self._pooled) * MIXED_FACTOR
        return np.broadcast_to(out, np.broadcast_shapes(n.shape, np.shape(context))).copy()

    def decode_alone_time_s(self, context: npt.ArrayLike) -> FloatArray:
        return interp_extrap(context, self._tx, self._ty)
