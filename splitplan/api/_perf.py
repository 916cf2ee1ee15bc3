"""`splitplan perf check` and `splitplan perf fit` as library functions."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from splitplan.errors import InputError
from splitplan.perf.check import CheckResult, GroupMape, check_profile


def perf_check(
    profile: str | Path,
    perf: str = "analytic",
    tensor_parallel: int | None = 8,
    split_seed: int = 0,
    prompt_curves: str = "by-count",
) -> CheckResult:
    """MAPE (percent) of the analytic or profile performance model against a profile table."""
    _whole("--seed", split_seed, 0)
    if tensor_parallel is not None:
        _whole("--tensor-parallel", tensor_parallel, 1)
    if perf == "analytic" and split_seed != 0:
        raise InputError("--seed sets the 80:20 split of --perf profile; the analytic check uses every row")
    if perf == "analytic" and prompt_curves != "by-count":
        raise InputError("--prompt-curves applies to --perf profile, not the analytic model")
    return check_profile(
        profile,
        perf=perf,
        tensor_parallel=tensor_parallel,
        split_seed=split_seed,
        prompt_curves=prompt_curves,
    )


@dataclass(frozen=True, slots=True)
class PerfFitResult:
    out: str
    gpus: list[str]
    refined_models: list[str]
    profile_sha256: str
    tensor_parallel: int

    def to_json(self) -> dict[str, object]:
        return {
            "out": self.out,
            "gpus": self.gpus,
            "refined_models": self.refined_models,
            "profile_sha256": self.profile_sha256,
            "tensor_parallel": self.tensor_parallel,
        }


def perf_fit(
    profile: str | Path, out: str | Path, tensor_parallel: int = 8, per_model: bool = True
) -> PerfFitResult:
    """Calibrate the analytic model to a profile table and write the coefficients (TOML, atomically)."""
    from splitplan._io import check_output_path

    _whole("--tensor-parallel", tensor_parallel, 1)
    check_output_path(out, "--out", (".toml",))
    from splitplan.perf.fit import fit_analytic, save_fit

    result = fit_analytic(profile, tensor_parallel=tensor_parallel, per_model=per_model)
    path = save_fit(result, out)
    return PerfFitResult(
        out=str(path),
        gpus=sorted(result.coefficients),
        refined_models=[f"{g}/{m}" for g, m in sorted(result.models)],
        profile_sha256=result.profile_sha256,
        tensor_parallel=result.tensor_parallel,
    )


def _whole(option: str, value: object, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InputError(f"{option} must be a whole number ≥ {low}, got {value!r}")


__all__ = ["CheckResult", "GroupMape", "PerfFitResult", "perf_check", "perf_fit"]
