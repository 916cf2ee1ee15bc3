"""Layer 2: calibrate the analytic model's coefficients to a profile table, per GPU type.

Least squares (scipy) on the relative error of every prompt and token row of the GPU type's groups
(power-capped rows included, with the cap curve of perf/base.py applied), parameters in log space
within physical bounds. The shared per-GPU fit is what other models on that GPU use. With
`per_model=True` (the shipped calibration) a second pass refits every coefficient per (GPU type,
model), starting from the shared fit: the measured prompt-throughput knee differs between models in
a way the roofline terms do not capture, and the per-group accuracy targets need it.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from splitplan._io import write_text_atomic
from splitplan.catalog import Machine, ModelSpec, get_model
from splitplan.errors import InputError
from splitplan.perf.analytic import AnalyticCoefficients, AnalyticPerfModel
from splitplan.perf.check import machine_for_hardware, predict
from splitplan.perf.profile import ProfileTable, read_profile

# Bounds of the fitted coefficients (same order as AnalyticCoefficients.numeric_fields()).
_BOUNDS = {
    "bw_eff": (0.05, 1.0),
    "prompt_flops_eff": (0.01, 1.0),
    "token_flops_eff": (0.005, 1.0),
    "prompt_overhead_s": (1e-5, 1.0),
    "token_overhead_s": (1e-5, 1.0),
    "token_seq_s": (1e-7, 0.01),
    "knee_tokens": (256.0, 1e6),
    "knee_gain": (1e-3, 10.0),
    "knee_power": (0.5, 8.0),
}
FIT_COMMAND = (
    "splitplan perf fit --profile ../shared/reference/splitwise-sim/perf_model.csv "
    "--out data/perf/analytic_coeffs.toml"
)


@dataclass(frozen=True, slots=True)
class FitResult:
    coefficients: dict[str, AnalyticCoefficients]
    models: dict[tuple[str, str], AnalyticCoefficients]
    default: AnalyticCoefficients
    default_from: str
    profile: str
    profile_sha256: str
    tensor_parallel: int
    per_model: bool
    rows: dict[object, int]

    def to_toml(self, date: str | None = None) -> str:
        date = date or _dt.date.today().isoformat()
        lines = [
            "# Analytic performance-model coefficients (efficiencies are fractions of catalog peaks).",
            "# Fitted to the SplitwiseSim profile table (github.com/Mutinifni/splitwise-sim, MIT),",
            f"# tensor parallelism {self.tensor_parallel}; regenerate with:",
            f"#   {FIT_COMMAND}",
            f"# input sha256: {self.profile_sha256}",
            f"# date: {date}",
            f"# per-model refinements: {'yes' if self.per_model else 'no'}",
            "schema_version = 1",
            "",
            "# GPU types without a calibration use these (copied from the fit of "
            f"{self.default_from}); calibrated = false.",
            "[default]",
            *_entry_lines(self.default),
            f'source = "defaults: fit of {self.default_from}"',
        ]
        for gpu, c in sorted(self.coefficients.items()):
            lines += [
                "",
                f"[gpu.{gpu}]",
                *_entry_lines(c),
                f'source = "fit to {self.rows[gpu]} profile rows at TP{self.tensor_parallel}"',
            ]
            for (g, m), mc in sorted(self.models.items()):
                if g == gpu:
                    lines += [
                        "",
                        f'[gpu.{gpu}.model."{m}"]',
                        *_entry_lines(mc),
                        f'source = "per-model refinement, {self.rows[g, m]} rows"',
                    ]
        return "\n".join(lines) + "\n"


def _entry_lines(c: AnalyticCoefficients) -> list[str]:
    return [f"{k} = {getattr(c, k):.6g}" for k in AnalyticCoefficients.numeric_fields()]


def _gpu_groups(table: ProfileTable) -> dict[str, list[tuple[ModelSpec, Machine, ProfileTable]]]:
    out: dict[str, list[tuple[ModelSpec, Machine, ProfileTable]]] = {}
    for model_name, hardware, tp in table.groups():
        machine = machine_for_hardware(hardware, tp)
        rows = table.subset(table.mask(model_name, hardware, tp))
        out.setdefault(machine.type.gpu.name, []).append((get_model(model_name), machine, rows))
    return out


def _residuals(
    coeffs: AnalyticCoefficients, groups: list[tuple[ModelSpec, Machine, ProfileTable]]
) -> np.ndarray:
    res = []
    for model, machine, rows in groups:
        prompt, token = predict(AnalyticPerfModel(model, machine, coeffs), rows)
        res.append(prompt / rows.prompt_time_s - 1.0)
        res.append(token / rows.token_time_s - 1.0)
    return np.concatenate(res)


def _fit_gpu(
    groups: list[tuple[ModelSpec, Machine, ProfileTable]], start: AnalyticCoefficients | None = None
) -> AnalyticCoefficients:
    from scipy.optimize import least_squares

    names = AnalyticCoefficients.numeric_fields()
    lo = np.log([_BOUNDS[k][0] for k in names])
    hi = np.log([_BOUNDS[k][1] for k in names])
    start = start or AnalyticCoefficients()
    x0 = np.clip(np.log([getattr(start, k) for k in names]), lo + 1e-9, hi - 1e-9)

    def make(x: np.ndarray) -> AnalyticCoefficients:
        return AnalyticCoefficients(**dict(zip(names, np.exp(x).tolist(), strict=True)), calibrated=True)

    best = None
    for scale in (1.0, 0.3, 3.0):  # a few starts: the max() of the roofline makes the fit non-smooth
        xs = np.clip(x0 + np.log(scale) * np.array([0, 0, 0, 1, 1, 1, 0, 0, 0]), lo + 1e-9, hi - 1e-9)
        sol = least_squares(
            lambda x: _residuals(make(x), groups),
            xs,
            bounds=(lo, hi),
            loss="soft_l1",
            f_scale=0.05,
            x_scale=1.0,
            max_nfev=4000,
        )
        if best is None or sol.cost < best.cost:
            best = sol
    assert best is not None
    return make(best.x)


def fit_analytic(
    profile_path: str | Path,
    tensor_parallel: int = 8,
    per_model: bool = True,
    default_from: str = "h100-80gb",
) -> FitResult:
    """Fit the analytic coefficients of every GPU type in the profile (at one TP)."""
    path = Path(profile_path)
    table = read_profile(str(path))
    keep = table.tensor_parallel == int(tensor_parallel)
    if not keep.any():
        raise InputError(f"profile {path} has no rows at tensor parallelism {tensor_parallel}")
    table = table.subset(keep)
    by_gpu = _gpu_groups(table)
    coefficients: dict[str, AnalyticCoefficients] = {}
    models: dict[tuple[str, str], AnalyticCoefficients] = {}
    rows: dict[object, int] = {}
    for gpu, groups in sorted(by_gpu.items()):
        c = _fit_gpu(groups)
        coefficients[gpu] = c
        rows[gpu] = sum(len(r.model) for _, _, r in groups)
        if per_model:
            for name in sorted({m.name for m, _, _ in groups}):
                sub = [g for g in groups if g[0].name == name]
                models[gpu, name] = _fit_gpu(sub, start=c)
                rows[gpu, name] = sum(len(r.model) for _, _, r in sub)
    src = default_from if default_from in coefficients else sorted(coefficients)[-1]
    default = dataclasses.replace(coefficients[src], calibrated=False)
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    return FitResult(
        coefficients, models, default, src, str(path), sha, int(tensor_parallel), per_model, rows
    )


def save_fit(result: FitResult, out: str | Path, date: str | None = None) -> Path:
    out = Path(out)
    write_text_atomic(out, result.to_toml(date))
    return out
