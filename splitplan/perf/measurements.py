"""Layer 2: measured iteration times of either table schema, as one set of rows to fit and score.

Two schemas are read:
- the **profile** schema (SplitwiseSim's perf_model.csv: model, hardware, prompt_size, batch_size,
  token_size, prompt_time, token_time, tensor_parallel; milliseconds): each row gives a `prompt`
  row (batch_size prompts of prompt_size tokens) and a `token` row (batch_size decodes holding on
  average prompt_size + token_size / 2 tokens of KV each: token_time is the mean decode iteration
  over the token_size tokens; prompt_tokens keeps prompt_size); fp16; hardware "<gpu>-pcap" is
  that GPU at a 0.7 power cap;
- the **measurement** schema (source, model, gpu, tp, precision, phase, batch_size, prompt_tokens,
  context_tokens, output_tokens, measured_ms, …): `prompt`, `token` (context_tokens in total) and
  `static_batch` rows (one prefill of batch_size × prompt_tokens, then output_tokens − 1 decode
  iterations of batch_size decodes whose context grows by one token per iteration per request).

A group is (model, hardware, TP, precision) — the unit leave-one-group-out holds out.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import numpy.typing as npt

from splitplan.catalog import Machine, ModelSpec, get_machine_type, get_model
from splitplan.catalog.precision import parse_precision
from splitplan.errors import InputError
from splitplan.perf.base import FloatArray, PerfModel
from splitplan.perf.profile import CAPPED_POWER, CAPPED_SUFFIX, PROFILE_COLUMNS

MEASUREMENT_COLUMNS = (
    "source",
    "model",
    "gpu",
    "tp",
    "precision",
    "phase",
    "batch_size",
    "prompt_tokens",
    "context_tokens",
    "output_tokens",
    "measured_ms",
)
PHASES = ("prompt", "token", "static_batch")
PROFILE_SOURCE = "profile"

Group = tuple[str, str, int, str]  # (model, hardware, tp, precision)


@dataclass(frozen=True, slots=True)
class Measurements:
    """Columnar rows; times in seconds. `hardware` keeps a profile's "-pcap" label."""

    path: str
    schema: str  # "profile" | "measurement"
    sha256: str
    source: npt.NDArray[np.str_]
    model: npt.NDArray[np.str_]
    hardware: npt.NDArray[np.str_]
    tp: npt.NDArray[np.int64]
    precision: npt.NDArray[np.str_]
    phase: npt.NDArray[np.str_]
    batch: FloatArray
    prompt_tokens: FloatArray
    context_tokens: FloatArray
    output_tokens: FloatArray
    measured_s: FloatArray

    def __len__(self) -> int:
        return len(self.model)

    def group_keys(self) -> list[Group]:
        return [
            (str(m), str(h), int(t), str(p))
            for m, h, t, p in zip(self.model, self.hardware, self.tp, self.precision, strict=True)
        ]

    def groups(self) -> list[Group]:
        return sorted(set(self.group_keys()))

    def group_mask(self, group: Group) -> npt.NDArray[np.bool_]:
        m, h, t, p = group
        return (self.model == m) & (self.hardware == h) & (self.tp == t) & (self.precision == p)

    def subset(self, mask: npt.NDArray[np.bool_]) -> Measurements:
        arrays = {
            f.name: getattr(self, f.name)[mask]
            for f in dataclasses.fields(self)
            if f.name not in ("path", "schema", "sha256")
        }
        return Measurements(self.path, self.schema, self.sha256, **arrays)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@cache
def read_measurements(path: str | Path) -> Measurements:
    """Read a profile-schema or measurement-schema CSV (told apart by its header)."""
    p = Path(path)
    from splitplan._io import read_text_file

    text = read_text_file(p, "measurements")  # unreadable, not UTF-8 or a URL: one line
    rows = list(csv.reader(text.splitlines()))
    if not rows or not rows[0]:
        raise InputError(f"measurements {p} is empty")
    header = [h.strip() for h in rows[0]]
    if all(c in header for c in MEASUREMENT_COLUMNS):
        return _read_measurement_schema(p, header, rows[1:])
    if all(c in header for c in PROFILE_COLUMNS):
        return _from_profile(p)
    missing = [c for c in MEASUREMENT_COLUMNS if c not in header]
    raise InputError(
        f"{p}: neither a profile table nor a measurement table (missing column(s) {', '.join(missing)})"
    )


def _from_profile(p: Path) -> Measurements:
    from splitplan.perf.profile import read_profile

    t = read_profile(str(p))
    n = len(t.model)
    b = t.batch_size.astype(np.float64)
    ps = t.prompt_size.astype(np.float64)
    ctx = b * (ps + t.token_size / 2.0)

    def both(a: npt.NDArray) -> npt.NDArray:
        return np.concatenate([a, a])

    return Measurements(
        path=str(p),
        schema="profile",
        sha256=_sha256(p),
        source=np.full(2 * n, PROFILE_SOURCE),
        model=both(t.model),
        hardware=both(t.hardware),
        tp=both(t.tensor_parallel),
        precision=np.full(2 * n, "fp16"),
        phase=np.array(["prompt"] * n + ["token"] * n),
        batch=both(b),
        prompt_tokens=both(ps),
        context_tokens=np.concatenate([np.zeros(n), ctx]),
        output_tokens=np.zeros(2 * n),
        measured_s=np.concatenate([t.prompt_time_s, t.token_time_s]),
    )


def _read_measurement_schema(p: Path, header: list[str], body: list[list[str]]) -> Measurements:
    idx = {c: header.index(c) for c in MEASUREMENT_COLUMNS}
    cols: dict[str, list[object]] = {c: [] for c in MEASUREMENT_COLUMNS}
    for lineno, row in enumerate(body, start=2):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) < len(header):
            raise InputError(f"{p}:{lineno}: expected {len(header)} fields, got {len(row)}")
        c = ""
        try:
            for c in ("source", "model", "gpu"):
                cols[c].append(row[idx[c]].strip())
            c = "precision"
            cols[c].append(parse_precision(row[idx[c]].strip(), "precision").value)
            c = "phase"
            phase = row[idx[c]].strip()
            if phase not in PHASES:
                raise ValueError(f"must be one of {', '.join(PHASES)}")
            cols[c].append(phase)
            need = {
                "prompt": ("batch_size", "prompt_tokens"),
                "token": ("batch_size", "context_tokens"),
                "static_batch": ("batch_size", "prompt_tokens", "output_tokens"),
            }[phase]
            for c in ("tp", "batch_size", "prompt_tokens", "context_tokens", "output_tokens"):
                raw = row[idx[c]].strip()
                if not raw:
                    if c in need or c == "tp":
                        raise ValueError(f"is required for a {phase} row")
                    cols[c].append(0.0)
                    continue
                v = float(raw)
                if not (np.isfinite(v) and v > 0 and v == int(v)):
                    raise ValueError("must be a positive integer")
                cols[c].append(v)
            c = "measured_ms"
            v = float(row[idx[c]])
            if not (np.isfinite(v) and v > 0):
                raise ValueError("must be a positive number")
            cols[c].append(v / 1000.0)
        except (ValueError, InputError) as exc:
            raise InputError(f"{p}:{lineno}: {c} {row[idx[c]].strip()!r}: {exc}") from None
    if not cols["model"]:
        raise InputError(f"measurements {p} has no data rows")
    return Measurements(
        path=str(p),
        schema="measurement",
        sha256=_sha256(p),
        source=np.array(cols["source"]),
        model=np.array(cols["model"]),
        hardware=np.array(cols["gpu"]),
        tp=np.array(cols["tp"], dtype=np.int64),
        precision=np.array(cols["precision"]),
        phase=np.array(cols["phase"]),
        batch=np.array(cols["batch_size"], dtype=np.float64),
        prompt_tokens=np.array(cols["prompt_tokens"], dtype=np.float64),
        context_tokens=np.array(cols["context_tokens"], dtype=np.float64),
        output_tokens=np.array(cols["output_tokens"], dtype=np.float64),
        measured_s=np.array(cols["measured_ms"], dtype=np.float64),
    )


def machine_for_group(hardware: str, tp: int, precision: str) -> Machine:
    """The catalog instance a row's hardware label, TP and precision stand for.

    "<gpu>" → that GPU's node type with `tp` GPUs per instance; "<gpu>-pcap" → the same at a 0.7
    power cap; a TP that does not divide the catalog node is a node of that size.
    """
    capped = hardware.endswith(CAPPED_SUFFIX)
    gpu = hardware[: -len(CAPPED_SUFFIX)] if capped else hardware
    mtype = get_machine_type(gpu)
    if mtype.gpus % int(tp):
        mtype = dataclasses.replace(mtype, gpus=int(tp))
    prec = parse_precision(precision, "precision")
    return Machine(
        type=mtype,
        tp=int(tp),
        power_cap=CAPPED_POWER if capped else 1.0,
        weight_precision=prec,
        kv_precision=parse_precision(precision, "KV precision", kv=True),
    )


def group_model(group: Group) -> tuple[ModelSpec, Machine]:
    model, hardware, tp, precision = group
    return get_model(model), machine_for_group(hardware, tp, precision)


def static_batch_time_s(
    perf: PerfModel, batch: FloatArray, prompt_tokens: FloatArray, output_tokens: FloatArray
) -> FloatArray:
    """One prefill of batch × prompt tokens, then output − 1 decodes of `batch` requests whose
    contexts are prompt + j tokens at decode j = 1 … output − 1.

    Decode time is affine in context (f(batch) + g · context), so the sum over decodes is exact in
    closed form: (output − 1) · f(batch) + g · batch · Σ_j (prompt + j).
    """
    b = np.asarray(batch, dtype=np.float64)
    p = np.asarray(prompt_tokens, dtype=np.float64)
    steps = np.maximum(np.asarray(output_tokens, dtype=np.float64) - 1.0, 0.0)
    prefill = perf.prompt_time_s(b * p, b)
    affine = getattr(perf, "token_affine", None)
    if affine is not None:
        f, g = affine(b)
        ctx_sum = b * (steps * p + steps * (steps + 1.0) / 2.0)
        return np.asarray(prefill + steps * f + g * ctx_sum, dtype=np.float64)
    # a model without the affine form (e.g. a profile table): sum the iterations, vectorized
    total = np.array(prefill, dtype=np.float64)
    for i in range(len(b)):
        j = np.arange(1.0, steps[i] + 1.0)
        total[i] += float(np.sum(perf.token_time_s(np.full(j.shape, b[i]), b[i] * (p[i] + j))))
    return total


def predict_rows(perf: PerfModel, rows: Measurements) -> FloatArray:
    """Predicted seconds for rows of one group (all phases)."""
    out = np.empty(len(rows), dtype=np.float64)
    pr = rows.phase == "prompt"
    if pr.any():
        out[pr] = perf.prompt_time_s(rows.batch[pr] * rows.prompt_tokens[pr], rows.batch[pr])
    tk = rows.phase == "token"
    if tk.any():
        if perf.kind == "profile":
            # the profile model keys its token curve on batch tokens = prompt × batch (perf/check.py)
            known = rows.prompt_tokens[tk] > 0
            keys = np.where(known, rows.batch[tk] * rows.prompt_tokens[tk], rows.batch[tk])
            out[tk] = perf.decode_alone_time_s(keys)
        else:
            out[tk] = perf.token_time_s(rows.batch[tk], rows.context_tokens[tk])
    sb = rows.phase == "static_batch"
    if sb.any():
        out[sb] = static_batch_time_s(perf, rows.batch[sb], rows.prompt_tokens[sb], rows.output_tokens[sb])
    return out
