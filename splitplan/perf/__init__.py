"""Layer 2 — performance models: iteration times per machine, vectorized over numpy arrays."""

from __future__ import annotations

from pathlib import Path

from splitplan.catalog import Machine, ModelSpec
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
    """`perf` is "analytic" (the shipped calibrated roofline) or the path of a profile CSV.

    `prompt_curves` applies to a profile ("by-count" or the reference's "pooled").
    """
    if str(perf) == "analytic":
        from splitplan.perf.analytic import AnalyticPerfModel

        return AnalyticPerfModel(model, machine)
    return ProfilePerfModel(read_profile(str(perf)), model, machine, prompt_curves)


__all__ = [
    "PerfModel",
    "ProfilePerfModel",
    "ProfileTable",
    "get_perf_model",
    "kv_capacity_bytes",
    "prompt_cap_factor",
    "read_profile",
    "token_cap_factor",
]
