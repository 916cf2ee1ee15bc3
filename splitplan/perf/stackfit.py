"""Layer 2: calibrate a serving stack (StackParams of the physical model) to measured rows.

Least squares (scipy, soft-L1 loss) on the relative error of every row, each (group, phase) weighted
equally whatever its row count, parameters in log space within STACK_BOUNDS — so a fitted value
is always one the physics allows. Only the stack's free parameters move; the rest keep the
datasheet defaults (or the values a stack pins, e.g. no host overhead in GPU kernel sums).
Leave-one-group-out (`cross_validate`) refits without each (model, hardware, TP, precision)
group in turn and scores the group it left out.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from splitplan.catalog import Machine, ModelSpec
from splitplan.errors import InputError
from splitplan.perf.base import FloatArray
from splitplan.perf.measurements import Group, Measurements, group_model, predict_rows
from splitplan.perf.physical import STACK_BOUNDS, PhysicalPerfModel, StackParams

# The optimizer works in log space, so a zero lower bound becomes this floor (seconds or a gain).
_LOG_FLOOR = {
    "iteration_overhead_s": 1e-6,
    "layer_overhead_s": 1e-8,
    "sequence_overhead_s": 1e-8,
    "knee_gain": 1e-4,
}
# What a fit moves when the stack does not say: everything but the large-prefill knee.
DEFAULT_FREE = (
    "compute_eff",
    "gemm_half_elements",
    "attention_eff",
    "weight_bw_eff",
    "kv_bw_eff",
    "allreduce_latency_scale",
    "link_bw_eff",
    "iteration_overhead_s",
    "layer_overhead_s",
)
KNEE = ("knee_elements", "knee_gain", "knee_power")


def _bounds(name: str) -> tuple[float, float]:
    lo, hi = STACK_BOUNDS[name]
    return max(lo, _LOG_FLOOR.get(name, lo)), hi


@dataclass(frozen=True, slots=True)
class _Prepared:
    """Rows split by group with their instance, built once per fit."""

    groups: list[tuple[Group, ModelSpec, Machine, Measurements, FloatArray]]


def _prepare(rows: Measurements) -> _Prepared:
    out: list[tuple[Group, ModelSpec, Machine, Measurements, FloatArray]] = []
    for g in rows.groups():
        sub = rows.subset(rows.group_mask(g))
        model, machine = group_model(g)
        w = np.empty(len(sub))
        for ph in np.unique(sub.phase):
            m = sub.phase == ph
            w[m] = 1.0 / np.sqrt(m.sum())
        out.append((g, model, machine, sub, w))
    return _Prepared(out)


def predict_all(params: StackParams, prep: _Prepared) -> list[FloatArray]:
    return [
        predict_rows(PhysicalPerfModel(model, machine, params), sub)  # type: ignore[arg-type]
        for _, model, machine, sub, _ in prep.groups
    ]


def fit_params(
    rows: Measurements,
    free: tuple[str, ...] = DEFAULT_FREE,
    start: StackParams | None = None,
) -> StackParams:
    """The StackParams (free ones fitted, the others from `start`) that best predict `rows`."""
    from scipy.optimize import least_squares

    if len(rows) == 0:
        raise InputError("nothing to fit: no rows selected")
    unknown = [f for f in free if f not in STACK_BOUNDS]
    if unknown:
        raise InputError(f"unknown stack parameter(s) {', '.join(unknown)}")
    start = start or StackParams()
    prep = _prepare(rows)
    lo = np.log([_bounds(k)[0] for k in free])
    hi = np.log([_bounds(k)[1] for k in free])
    base = start.to_dict()

    def make(x: np.ndarray) -> StackParams:
        vals = dict(base)
        vals.update(zip(free, np.exp(np.clip(x, lo, hi)).tolist(), strict=True))
        return StackParams(**vals)

    def residuals(x: np.ndarray) -> np.ndarray:
        preds = predict_all(make(x), prep)
        return np.concatenate(
            [w * (p / sub.measured_s - 1.0) for p, (_, _, _, sub, w) in zip(preds, prep.groups, strict=True)]
        )

    x0 = np.clip(np.log([max(base[k], _bounds(k)[0]) for k in free]), lo + 1e-9, hi - 1e-9)
    best = None
    for shift in (0.0, -1.0, 1.0):  # a few starts: the roofline max() makes the fit non-smooth
        xs = np.clip(x0 + shift * 0.5 * (hi - lo) / 4.0, lo + 1e-9, hi - 1e-9)
        sol = least_squares(residuals, xs, bounds=(lo, hi), loss="soft_l1", f_scale=0.05, max_nfev=3000)
        if best is None or sol.cost < best.cost:
            best = sol
    assert best is not None
    return make(best.x)


@dataclass(frozen=True, slots=True)
class GroupError:
    group: Group
    source: str
    phase: str
    mape: float  # percent
    n: int


def score(params: StackParams, rows: Measurements) -> list[GroupError]:
    """MAPE per (group, phase) of the physical model under `params`."""
    out = []
    prep = _prepare(rows)
    for pred, (g, _, _, sub, _) in zip(predict_all(params, prep), prep.groups, strict=True):
        ape = np.abs(pred / sub.measured_s - 1.0) * 100.0
        for ph in sorted(set(sub.phase.tolist())):
            m = sub.phase == ph
            src = ",".join(sorted(set(sub.source[m].tolist())))
            out.append(GroupError(g, src, ph, float(ape[m].mean()), int(m.sum())))
    return out


def cross_validate(
    rows: Measurements, free: tuple[str, ...] = DEFAULT_FREE, start: StackParams | None = None
) -> tuple[list[GroupError], dict[str, float]]:
    """Leave-one-group-out: per held-out (group, phase) MAPE, and the pooled MAPE per phase."""
    errors: list[GroupError] = []
    apes: dict[str, list[float]] = {}
    for g in rows.groups():
        held = rows.group_mask(g)
        if held.all():
            raise InputError("leave-one-group-out needs at least two groups")
        params = fit_params(rows.subset(~held), free, start)
        sub = rows.subset(held)
        errs = score(params, sub)
        errors += errs
        pred = predict_all(params, _prepare(sub))[0]
        ape = np.abs(pred / sub.measured_s - 1.0) * 100.0
        for ph in set(sub.phase.tolist()):
            apes.setdefault(ph, []).extend(ape[sub.phase == ph].tolist())
    return errors, {ph: float(np.mean(v)) for ph, v in sorted(apes.items())}


def with_values(params: StackParams, **values: float) -> StackParams:
    return dataclasses.replace(params, **values)


# Refinements per (GPU type, model) move only what the engine, not the GPU, decides: host and
# launch overheads, the large-prefill knee (where the engine's all-reduce slows down, in per-GPU
# shard elements) and the achieved compute fractions. Bandwidth efficiencies and the all-reduce's
# link terms stay shared, so TP scaling comes from the physics.
REFINE_FREE = (
    "iteration_overhead_s",
    "layer_overhead_s",
    "sequence_overhead_s",
    "knee_elements",
    "knee_gain",
    "knee_power",
    "compute_eff",
    "attention_eff",
)
HOST = ("iteration_overhead_s", "sequence_overhead_s")


@dataclass(frozen=True, slots=True)
class FitOptions:
    """What `splitplan perf fit` fits: rows selected, parameters freed, refinements."""

    source: str | None = None  # keep rows whose source starts with this
    tensor_parallel: int | None = None  # keep rows at this TP (the others are held out)
    host_overhead: bool = True  # False: GPU kernel sums, no host time (pinned to 0)
    knee: bool = False  # fit the large-prefill knee
    sequence_overhead: bool = False  # fit a host cost per sequence in the batch
    refine: bool = False  # per (GPU type, model) refinements

    def free(self) -> tuple[str, ...]:
        free = list(DEFAULT_FREE) + (["sequence_overhead_s"] if self.sequence_overhead else [])
        if not self.host_overhead:
            free = [f for f in free if f not in HOST]
        return tuple(free + (list(KNEE) if self.knee else []))

    def start(self) -> StackParams:
        if self.host_overhead:
            return StackParams()
        return StackParams(iteration_overhead_s=0.0, sequence_overhead_s=0.0)

    def matching(self, rows: Measurements) -> np.ndarray:
        """Rows of the selected source and TP (consistent or not)."""
        keep = np.ones(len(rows), dtype=bool)
        if self.source:
            keep &= np.char.startswith(rows.source.astype(str), self.source)
        if self.tensor_parallel is not None:
            keep &= rows.tp == int(self.tensor_parallel)
        return keep

    def select(self, rows: Measurements) -> np.ndarray:
        """The rows a fit uses: matching and consistent with their group."""
        return self.matching(rows) & consistent_rows(rows)

    def describe(self) -> str:
        parts = []
        if self.source:
            parts.append(f"source {self.source}*")
        if self.tensor_parallel is not None:
            parts.append(f"TP{self.tensor_parallel}")
        return ", ".join(parts) or "all rows"

    def cli_args(self) -> str:
        args = []
        if self.source:
            args.append(f"--source {self.source}")
        if self.tensor_parallel is not None:
            args.append(f"--tensor-parallel {self.tensor_parallel}")
        if not self.host_overhead:
            args.append("--no-host-overhead")
        if self.knee:
            args.append("--knee")
        if self.sequence_overhead:
            args.append("--sequence-overhead")
        if self.refine:
            args.append("--refine")
        return " ".join(args)


def consistent_rows(rows: Measurements) -> np.ndarray:
    """False for rows that contradict their own group: a batch of prompts timed faster than a
    smaller batch of the same prompts (the SplitwiseSim table's TP2 batch-64 rows: 0.8 s for 64
    prompts of 512 tokens against 6.6 s for 32) — a truncated run, not an iteration. Such rows,
    and the decode rows measured in the same run, are left out of fits and scores (and counted)."""
    ok = np.ones(len(rows), dtype=bool)
    keys = rows.group_keys()
    pr = np.flatnonzero(rows.phase == "prompt")
    by: dict[tuple[object, float], dict[float, list[float]]] = {}
    for i in pr:
        by.setdefault((keys[i], rows.prompt_tokens[i]), {}).setdefault(rows.batch[i], []).append(
            rows.measured_s[i]
        )
    bad: set[tuple[object, float, float]] = set()
    for (g, p), per_batch in by.items():
        slowest = 0.0
        for b in sorted(per_batch):
            med = float(np.median(per_batch[b]))
            if med < slowest:
                bad.add((g, p, b))
            slowest = max(slowest, med)
    if bad:
        for j in range(len(rows)):
            if rows.phase[j] != "static_batch" and (keys[j], rows.prompt_tokens[j], rows.batch[j]) in bad:
                ok[j] = False
    return ok


def fit_stack(
    path: str,
    name: str,
    options: FitOptions,
    description: str = "",
    date: str | None = None,
    command: str | None = None,
):  # -> Stack
    """Fit stack `name` to the measurements at `path` (either schema) under `options`."""
    from splitplan.perf.measurements import read_measurements
    from splitplan.perf.stacks import Stack, today

    rows = read_measurements(path)
    keep = options.select(rows)
    sel = rows.subset(keep)
    if len(sel) == 0:
        raise InputError(f"{path}: no rows match {options.describe()}")
    free = options.free()
    params = fit_params(sel, free, options.start())
    refine: dict[tuple[str, str], StackParams] = {}
    if options.refine:
        gpus = np.array([_gpu_of(h) for h in sel.hardware])
        for gpu, model in sorted(set(zip(gpus.tolist(), sel.model.tolist(), strict=True))):
            sub = sel.subset((gpus == gpu) & (sel.model == model))
            rfree = tuple(f for f in REFINE_FREE if f in free or (f in KNEE and options.knee))
            refine[gpu, model] = fit_params(sub, rfree, params)
    dropped = int((options.matching(rows) & ~keep).sum())
    cmd = command or (
        f"splitplan perf fit --profile {path} --name {name} --out DIR {options.cli_args()}".strip()
    )
    prov: dict[str, object] = {
        "source": str(path),
        "schema": rows.schema,
        "sha256": rows.sha256,
        "rows": len(sel),
        "selection": options.describe(),
        "inconsistent_rows_dropped": dropped,
        "groups": len(sel.groups()),
        "date": date or today(),
        "command": cmd,
    }
    return Stack(
        name=name, params=params, description=description, fitted=True, provenance=prov, refine=refine
    )


def _gpu_of(hardware: str) -> str:
    from splitplan.perf.profile import CAPPED_SUFFIX

    return hardware[: -len(CAPPED_SUFFIX)] if hardware.endswith(CAPPED_SUFFIX) else hardware
