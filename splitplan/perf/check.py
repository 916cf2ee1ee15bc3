"""Layer 2: accuracy of a performance model against a profile table (MAPE per group and overall).

How a profile row (prompt_size p, batch_size b, token_size t) is compared:
- prompt phase: `prompt_time_s(p · b, prompts=b)` against prompt_time;
- token phase, analytic model: `token_time_s(b, b · (p + t/2))` against token_time — the row's
  token_time is the mean decode iteration over t tokens, during which each of the b requests holds
  on average p + t/2 tokens of KV;
- token phase, profile model: `decode_alone_time_s(p · b)`. The reference simulator keys its token
  curve by batch tokens = p · b (not by the number of decodes), so the profile model's
  decode-alone lookup at p · b is exactly the curve point the row contributed to.

Profile hardware names map onto catalog machines: "<gpu>" → that GPU's machine type with
gpus = tensor_parallel; "<gpu>-pcap" → the same at a 0.7 power cap.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from splitplan._rng import make_rng
from splitplan.catalog import Machine, get_machine_type, get_model
from splitplan.errors import InputError
from splitplan.perf.base import FloatArray, PerfModel
from splitplan.perf.profile import (
    CAPPED_POWER,
    CAPPED_SUFFIX,
    PROMPT_CURVES,
    ProfilePerfModel,
    ProfileTable,
    read_profile,
)

PERF_KINDS = ("analytic", "profile")
TRAIN_FRACTION = 0.8


def machine_for_hardware(hardware: str, tensor_parallel: int) -> Machine:
    """The catalog machine a profile hardware label stands for (unknown GPU → CatalogError)."""
    capped = hardware.endswith(CAPPED_SUFFIX)
    gpu = hardware[: -len(CAPPED_SUFFIX)] if capped else hardware
    mtype = get_machine_type(gpu)
    if mtype.gpus % int(tensor_parallel):
        # a TP that does not tile the catalog node (a 16-GPU profile row, say): a node of that size
        mtype = dataclasses.replace(mtype, gpus=int(tensor_parallel))
    return Machine(type=mtype, tp=int(tensor_parallel), power_cap=CAPPED_POWER if capped else 1.0)


def token_context(table: ProfileTable) -> FloatArray:
    """Total KV tokens of a token-phase row: b · (p + t/2) (see the module docstring)."""
    return table.batch_size * (table.prompt_size + table.token_size / 2.0)


def predict(perf: PerfModel, rows: ProfileTable) -> tuple[FloatArray, FloatArray]:
    """(prompt, token) predictions in seconds for profile rows of one group."""
    n = (rows.prompt_size * rows.batch_size).astype(np.float64)
    prompt = perf.prompt_time_s(n, rows.batch_size)
    if perf.kind == "profile":
        token = perf.decode_alone_time_s(n)
    else:
        token = perf.token_time_s(rows.batch_size.astype(np.float64), token_context(rows))
    return np.asarray(prompt, dtype=np.float64), np.asarray(token, dtype=np.float64)


@dataclass(frozen=True, slots=True)
class GroupMape:
    model: str
    hardware: str
    tensor_parallel: int
    phase: str
    mape: float  # percent
    n: int
    precision: str = "fp16"
    source: str = "profile"


@dataclass(frozen=True, slots=True)
class CheckResult:
    perf: str
    profile: str
    groups: list[GroupMape]
    prompt_mape: float  # percent, over every scored row
    token_mape: float
    prompt_curves: str | None = None  # the profile model's ("by-count" | "pooled"); None for analytic
    static_batch_mape: float | None = None  # measurement tables with static_batch rows
    rows_dropped: int = 0  # rows contradicting their own group (see stackfit.consistent_rows)

    def to_json(self) -> dict[str, object]:
        def num(v: float) -> float | None:
            return None if v != v else v  # NaN (no rows of that phase) → null

        overall: dict[str, object] = {
            "prompt_mape": num(self.prompt_mape),
            "token_mape": num(self.token_mape),
        }
        if self.static_batch_mape is not None:
            overall["static_batch_mape"] = self.static_batch_mape
        return {
            "perf": self.perf,
            "profile": self.profile,
            "prompt_curves": self.prompt_curves,
            "groups": [dataclasses.asdict(g) for g in self.groups],
            "overall": overall,
            "rows_dropped": self.rows_dropped,
        }

    def worst(self, phase: str) -> float:
        return max((g.mape for g in self.groups if g.phase == phase), default=0.0)


def _ape(pred: FloatArray, obs: FloatArray) -> FloatArray:
    return np.abs(pred - obs) / obs * 100.0


def check_profile(
    profile_path: str | Path,
    perf: str = "analytic",
    tensor_parallel: int | None = 8,
    split_seed: int = 0,
    coefficients_path: str | Path | None = None,
    prompt_curves: str = "by-count",
) -> CheckResult:
    """MAPE (percent) of a performance model against a profile table, per (model, hardware, TP, phase).

    `perf="profile"` builds the profile model from a seeded random 80 % of the rows and scores the
    other 20 %; `perf="analytic"` scores every row. `tensor_parallel=None` checks every TP.
    `prompt_curves` picks the profile model's prompt curves ("pooled" = the reference's).
    """
    if perf not in PERF_KINDS:
        raise InputError(f"unknown performance model {perf!r} (expected analytic or profile)")
    if prompt_curves not in PROMPT_CURVES:
        raise InputError(f"unknown prompt curves {prompt_curves!r} (expected by-count or pooled)")
    table = read_profile(str(profile_path))
    if tensor_parallel is not None:
        keep = table.tensor_parallel == int(tensor_parallel)
        if not keep.any():
            raise InputError(f"profile {table.path} has no rows at tensor parallelism {tensor_parallel}")
        table = table.subset(keep)
    if perf == "profile":
        order = make_rng(split_seed).permutation(len(table.model))
        train = np.zeros(len(order), dtype=bool)
        train[order[: round(TRAIN_FRACTION * len(order))]] = True
        train_table, test_table = table.subset(train), table.subset(~train)
    else:
        train_table = test_table = table
    coeffs = None
    if perf == "analytic":
        from splitplan.perf.analytic import load_coefficients

        coeffs = load_coefficients(coefficients_path)
    groups: list[GroupMape] = []
    all_ape: dict[str, list[FloatArray]] = {"prompt": [], "token": []}
    for model_name, hardware, tp in test_table.groups():
        rows = test_table.subset(test_table.mask(model_name, hardware, tp))
        model = get_model(model_name)
        machine = machine_for_hardware(hardware, tp)
        if perf == "profile":
            pm: PerfModel = ProfilePerfModel(train_table, model, machine, prompt_curves)
        else:
            from splitplan.perf.analytic import AnalyticPerfModel

            pm = AnalyticPerfModel(model, machine, coeffs)
        prompt, token = predict(pm, rows)
        for phase, pred, obs in (("prompt", prompt, rows.prompt_time_s), ("token", token, rows.token_time_s)):
            ape = _ape(pred, obs)
            all_ape[phase].append(ape)
            groups.append(GroupMape(model_name, hardware, int(tp), phase, float(np.mean(ape)), int(ape.size)))
    overall = {ph: float(np.mean(np.concatenate(v))) for ph, v in all_ape.items()}
    return CheckResult(
        perf,
        str(profile_path),
        groups,
        overall["prompt"],
        overall["token"],
        prompt_curves if perf == "profile" else None,
    )


def check_measurements(
    path: str | Path,
    perf: str = "kernels",
    tensor_parallel: int | None = None,
    source: str | None = None,
    prompt_curves: str = "by-count",
) -> CheckResult:
    """MAPE (percent) of any performance model (`--perf NAME|PATH`) against a table of either
    schema, per (model, hardware, TP, precision, phase) group, every row scored.

    Static-batch rows are predicted by summing the model's iterations (perf/measurements.py).
    Rows that contradict their own group are left out and counted (`rows_dropped`).
    """
    from splitplan.perf import get_perf_model
    from splitplan.perf.measurements import group_model, predict_rows, read_measurements
    from splitplan.perf.stackfit import consistent_rows

    rows = read_measurements(str(path))
    keep = np.ones(len(rows), dtype=bool)
    if tensor_parallel is not None:
        keep &= rows.tp == int(tensor_parallel)
    if source:
        keep &= np.char.startswith(rows.source.astype(str), source)
    if not keep.any():
        raise InputError(f"{path}: no rows match the selection (tensor parallelism / source)")
    ok = consistent_rows(rows)
    dropped = int((keep & ~ok).sum())
    rows = rows.subset(keep & ok)
    groups: list[GroupMape] = []
    all_ape: dict[str, list[FloatArray]] = {}
    for g in rows.groups():
        sub = rows.subset(rows.group_mask(g))
        model, machine = group_model(g)
        pm = get_perf_model(perf, model, machine, prompt_curves)
        ape = _ape(predict_rows(pm, sub), sub.measured_s)
        for phase in sorted(set(sub.phase.tolist())):
            m = sub.phase == phase
            all_ape.setdefault(phase, []).append(ape[m])
            src = ",".join(sorted(set(sub.source[m].tolist())))
            groups.append(GroupMape(g[0], g[1], g[2], phase, float(ape[m].mean()), int(m.sum()), g[3], src))
    overall = {ph: float(np.mean(np.concatenate(v))) for ph, v in all_ape.items()}
    return CheckResult(
        str(perf),
        str(path),
        groups,
        overall.get("prompt", float("nan")),
        overall.get("token", float("nan")),
        None,
        overall.get("static_batch"),
        dropped,
    )
