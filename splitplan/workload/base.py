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
    # the rate the arrivals were generated at (None for a replayed trace): see `offered_rate_rps`
    target_rate_rps: float | None = field(default=None, compare=False)

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

    # Request rate: the one home of its definitions.
    # - `rate_rps`: the observed arrival rate, requests ÷ time of the last arrival (what a replayed
    #   trace offers; trace statistics report it);
    # - `target_rate_rps`: the rate a generated workload was drawn at (its sample's observed rate
    #   differs by sampling noise);
    # - `offered_rate_rps`: the rate a plan is sized for — the target where there is one, else the
    #   observed rate. Searches, heatmaps and deployment plans use it.
    # - `interarrival_rate_rps`: the arrival process's rate estimated from the gaps between
    #   arrivals, (n − 1) ÷ (last − first) — what a queue sees, whatever time the trace starts at
    #   (the analytic evaluator's arrival rate).
    # A throughput (`SimResult.throughput_rps`, completed requests ÷ time) is a result, not a rate
    # of the workload; a search's rate factor scales `offered_rate_rps` (search.evaluate.scale_rate).
    @property
    def rate_rps(self) -> float:
        return self.n / self.duration_s if self.duration_s > 0 else float("inf")

    @property
    def interarrival_rate_rps(self) -> float:
        if self.n < 2:
            return 1.0  # no gap to measure: a nominal rate (one request sees no queue anyway)
        return (self.n - 1) / max(float(self.arrival_s[-1] - self.arrival_s[0]), 1e-9)

    @property
    def offered_rate_rps(self) -> float:
        """The rate this workload offers a cluster: its generator's target, else the observed rate."""
        return self.rate_rps if self.target_rate_rps is None else float(self.target_rate_rps)
