"""Layer 2 — performance models: iteration times per machine, vectorized over numpy arrays."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from splitplan.catalog import Machine, ModelSpec
from splitplan.errors import InputError
from splitplan.perf.base import (
    PerfModel,
    prompt_cap_factor,
    token_cap_factor,
)
from splitplan.perf.memory import kv_capacity_bytes
from splitplan.perf.profile import ProfilePerfModel, ProfileTable, read_profile


def get_perf_model(
    perf: str | Path, model: ModelSpec, machine: Machine, prompt_curves: str = "by-count"
) -> PerfModel:
    """`perf`: "analytic" (the shipped calibrated roofline), a stack name (`kernels`,
    `tensorrt-llm`, `splitwise-sim`, `datasheet` or a user catalog's), a stack file (.toml), a
    profile CSV (interpolated) or a measurement CSV (a stack fitted to it on first use).

    `prompt_curves` applies to a profile ("by-count" or the reference's "pooled").
    """
    kind, stack_or_path = resolve_perf(perf)
    if kind == "analytic":
        from splitplan.perf.analytic import AnalyticPerfModel

        return AnalyticPerfModel(model, machine)
    if kind == "profile":
        return ProfilePerfModel(read_profile(str(stack_or_path)), model, machine, prompt_curves)
    from splitplan.perf.physical import PhysicalPerfModel
    from splitplan.perf.stacks import Stack

    stack = stack_or_path
    assert isinstance(stack, Stack)  # resolve_perf: ("stack", Stack)
    return PhysicalPerfModel(
        model, machine, stack.params_for(machine.type.gpu.name, model.name), calibrated=stack.fitted
    )


def resolve_perf(perf: str | Path) -> tuple[str, object]:
    """("analytic", None) | ("profile", path) | ("stack", Stack) for a --perf value; a clear
    InputError for anything else. Cheap after the first call for a value (files are cached)."""
    from splitplan.perf.stacks import find_stack, load_stack, load_stack_file

    s = str(perf)
    if s == "analytic":
        return "analytic", None
    from splitplan._io import refuse_url

    refuse_url(s, "`perf`")  # else read as a local path, the URL's password in the error line
    p = Path(s)
    if p.suffix.lower() == ".csv":
        if not p.is_file():
            raise InputError(f"performance profile {s} does not exist")
        from splitplan.perf.measurements import read_measurements

        if read_measurements(str(p.resolve())).schema == "profile":
            return "profile", str(p)
        return "stack", _stack_fitted_to(str(p.resolve()))
    if p.suffix.lower() == ".toml":
        if not p.is_file():
            raise InputError(f"performance stack file {s} does not exist")
        return "stack", load_stack_file(str(p.resolve()))
    if find_stack(s) is None and p.is_file():
        return "profile", str(p)
    return "stack", load_stack(s)


@cache
def _stack_fitted_to(path: str) -> object:
    from splitplan.perf.stackfit import FitOptions, fit_stack

    return fit_stack(path, Path(path).stem, FitOptions(), description=f"fitted on use to {path}")


__all__ = [
    "PerfModel",
    "ProfilePerfModel",
    "ProfileTable",
    "get_perf_model",
    "kv_capacity_bytes",
    "prompt_cap_factor",
    "read_profile",
    "resolve_perf",
    "token_cap_factor",
]
