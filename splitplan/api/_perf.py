"""`splitplan perf check` and `splitplan perf fit` as library functions."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from splitplan.errors import InputError
from splitplan.perf.check import CheckResult, GroupMape, check_measurements, check_profile


def perf_check(
    profile: str | Path,
    perf: str = "analytic",
    tensor_parallel: int | None = 8,
    split_seed: int = 0,
    prompt_curves: str = "by-count",
    source: str | None = None,
) -> CheckResult:
    """MAPE (percent) of a performance model against a table of either schema.

    `perf` "analytic" or "profile" on a profile table: the calibrated roofline on every row, or the
    profile model on a seeded 80:20 split (as before). Anything else (a stack name, stack file, CSV)
    or a measurement table: that model on every row (`check_measurements`).
    Options that would not take effect are refused, naming the parameter.
    """
    from splitplan.perf.measurements import read_measurements

    _whole("`split_seed`", split_seed, 0)
    if tensor_parallel is not None:
        _whole("`tensor_parallel`", tensor_parallel, 1)
    if perf != "profile" and split_seed != 0:
        raise InputError(
            "`split_seed` sets the 80:20 split of `perf` profile; every other model is checked on every row"
        )
    from splitplan.perf.profile import PROMPT_CURVES

    if prompt_curves not in PROMPT_CURVES:
        raise InputError(f"unknown prompt curves {prompt_curves!r} (expected {' or '.join(PROMPT_CURVES)})")
    if prompt_curves != "by-count" and perf != "profile":
        from splitplan.perf import resolve_perf

        # only a profile model has prompt curves: the analytic model and a stack would ignore it
        if perf == "analytic" or resolve_perf(perf)[0] != "profile":
            raise InputError(
                f"`prompt_curves` applies to a profile model (`perf` profile or a profile CSV), not {perf}"
            )
    schema = read_measurements(str(profile)).schema
    if schema == "profile" and perf in ("analytic", "profile") and source is None:
        return check_profile(
            profile,
            perf=perf,
            tensor_parallel=tensor_parallel,
            split_seed=split_seed,
            prompt_curves=prompt_curves,
        )
    return check_measurements(
        profile, perf=perf, tensor_parallel=tensor_parallel, source=source, prompt_curves=prompt_curves
    )


@dataclass(frozen=True, slots=True)
class PerfFitResult:
    out: str
    gpus: list[str]
    refined_models: list[str]
    profile_sha256: str
    tensor_parallel: int | None
    name: str | None = None
    rows: int = 0
    cv: list[GroupMape] = field(default_factory=list)
    cv_overall: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        import dataclasses

        doc: dict[str, object] = {
            "out": self.out,
            "gpus": self.gpus,
            "refined_models": self.refined_models,
            "profile_sha256": self.profile_sha256,
            "tensor_parallel": self.tensor_parallel,
        }
        if self.name is not None:
            doc.update(name=self.name, rows=self.rows)
        if self.cv:
            doc["cv"] = {"groups": [dataclasses.asdict(g) for g in self.cv], "overall": self.cv_overall}
        return doc


def perf_fit(
    profile: str | Path,
    out: str | Path,
    tensor_parallel: int | None = 8,
    per_model: bool = True,
    *,
    name: str | None = None,
    source: str | None = None,
    host_overhead: bool = True,
    knee: bool = False,
    sequence_overhead: bool = False,
    refine: bool = False,
    cv: str | None = None,
    description: str = "",
    date: str | None = None,
) -> PerfFitResult:
    """Without `name`: calibrate the analytic model to a profile table and write its coefficient
    file `out`. With `name`: fit stack `name` of the physical model to a table of either schema and
    write `out`/perf/`name`.toml (where `--catalog out` finds it), with its provenance.
    `cv="group"` also reports leave-one-group-out error (group = model, GPU, TP, precision)."""
    if tensor_parallel is not None:
        _whole("`tensor_parallel`", tensor_parallel, 1)
    if name is None:
        from splitplan._io import check_output_path
        from splitplan.perf.fit import fit_analytic, save_fit

        check_output_path(out, "`out`", (".toml",))

        result = fit_analytic(profile, tensor_parallel=tensor_parallel or 8, per_model=per_model)
        path = save_fit(result, out)
        return PerfFitResult(
            out=str(path),
            gpus=sorted(result.coefficients),
            refined_models=[f"{g}/{m}" for g, m in sorted(result.models)],
            profile_sha256=result.profile_sha256,
            tensor_parallel=result.tensor_parallel,
        )
    from splitplan.perf.stackfit import FitOptions, cross_validate, fit_stack
    from splitplan.perf.stacks import save_stack

    if cv not in (None, "group"):
        raise InputError(f"`cv` must be 'group', got {cv!r}")
    if not name or "/" in name or name.startswith(".") or name == "analytic":
        raise InputError(f"stack name {name!r} is not allowed (a plain file name other than 'analytic')")
    from splitplan._io import check_output_folder

    # `out` is a catalog folder: a file, a path below a file or a URL is refused before the fit
    check_output_folder(out, "`out`")
    check_output_folder(Path(out) / "perf", "`out`")
    opts = FitOptions(
        source=source,
        tensor_parallel=tensor_parallel,
        host_overhead=host_overhead,
        knee=knee,
        sequence_overhead=sequence_overhead,
        refine=refine,
    )
    argv = opts.cli_args()
    if description:
        argv = f"{argv} --description {shlex.quote(description)}".strip()
    command = f"splitplan perf fit --profile {profile} --name {name} --out {out} {argv}".strip()
    stack = fit_stack(str(profile), name, opts, description=description, date=date, command=command)
    path = save_stack(stack, out)
    cv_groups: list[GroupMape] = []
    cv_overall: dict[str, float] = {}
    if cv == "group":
        from splitplan.perf.measurements import read_measurements

        rows = read_measurements(str(profile))
        sel = rows.subset(opts.select(rows))
        errs, cv_overall = cross_validate(sel, opts.free(), opts.start())
        cv_groups = [
            GroupMape(e.group[0], e.group[1], e.group[2], e.phase, e.mape, e.n, e.group[3], e.source)
            for e in errs
        ]
    return PerfFitResult(
        out=str(path),
        gpus=sorted({g for g, _ in stack.refine}),
        refined_models=[f"{g}/{m}" for g, m in sorted(stack.refine)],
        profile_sha256=str(stack.provenance["sha256"]),
        tensor_parallel=tensor_parallel,
        name=name,
        rows=int(stack.provenance["rows"]),  # type: ignore[call-overload]
        cv=cv_groups,
        cv_overall=cv_overall,
    )


def _whole(option: str, value: object, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InputError(f"{option} must be a whole number ≥ {low}, got {value!r}")


__all__ = ["CheckResult", "GroupMape", "PerfFitResult", "perf_check", "perf_fit"]
