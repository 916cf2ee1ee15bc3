"""Layer 3: a workload as columnar arrays — what the simulators consume."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from splitplan.errors import InputError


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """Requests sorted by arrival: arrival_s (float64, s), prompt/output token counts (int64 ≥ 1)."""

    arrival_s: npt.NDArray[np.float64]
    prompt_tokens: npt.NDArray[np.int64]
    output_tokens: npt.NDArray[np.int64]
    name: str = "workload"
    meta: dict[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        a = np.ascontiguousarray(self.arrival_s, dtype=np.float64)
        p = np.ascontiguousarray(self.prompt_tokens, dtype=np.int64)
        o = np.ascontiguousarray(self.output_tokens, dtype=np.int64)
        if not (a.ndim == p.ndim == o.ndim == 1 and len(a) == len(p) == len(o)):
            raise InputError("workload arrays must be 1-D and of equal length")
        if len(a) == 0:
            raise InputError(f"workload {self.name!r} has no requests")
        if not np.all(np.isfinite(a)) or np.any(a < 0):
            raise InputError(f"workload {self.name!r}: arrival times must be finite and ≥ 0")
        if np.any(np.diff(a) < 0):
            raise InputError(f"workload {self.name!r}: arrival times must be non-decreasing")
        if np.any(p < 1) or np.any(o < 1):
            raise InputError(f"workload {self.name!r}: token counts must be ≥ 1")
        for attr, arr in (("arrival_s", a), ("prompt_tokens", p), ("output_tokens", o)):
            arr.setflags(write=False)
            object.__setattr__(self, attr, arr)

    @property
    def n(self) -> int:
        return len(self.arrival_s)

    @property
    def duration_s(self) -> float:
        return float(self.arrival_s[-1]) if self.n else 0.0

    @property
    def rate_rps(self) -> float:
        return self.n / self.duration_s if self.duration_s > 0 else float("inf")
