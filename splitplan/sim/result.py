"""Layer 4: what a simulation of one configuration returns (DES or analytic)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from splitplan.design import ClusterConfig
from splitplan.slo import SLO_KEYS, SloVerdict

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestMetrics:
    """Per-request results, columnar. Latencies in seconds; NaN for a request never completed."""

    arrival_s: FloatArray
    prompt_tokens: IntArray
    output_tokens: IntArray
    ttft_s: FloatArray
    tbt_s: FloatArray
    e2e_s: FloatArray
    queue_s: FloatArray
    ttft_slowdown: FloatArray
    tbt_slowdown: FloatArray
    e2e_slowdown: FloatArray
    prompt_machine: IntArray
    token_machine: IntArray
    preemptions: IntArray

    @property
    def completed(self) -> npt.NDArray[np.bool_]:
        return np.isfinite(self.e2e_s)

    def columns(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(frozen=True, slots=True, kw_only=True)
class SimResult:
    config: ClusterConfig
    engine: str
    requests: int
    completed: int
    slowdown: dict[str, float]
    latency_s: dict[str, float]
    verdict: SloVerdict
    stable: bool
    throughput_rps: float
    utilization: dict[str, float]
    sim_wall_s: float
    per_request: RequestMetrics | None = None
    extra: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def meets_slo(self) -> bool:
        return self.stable and self.verdict.meets

    def to_json(self) -> dict[str, object]:
        """The `simulate --json` document (PRODUCT.md keys)."""
        cfg = self.config
        baseline = cfg.design.is_baseline

        def clean(x: float) -> float | None:
            return None if not math.isfinite(x) else round(x, 9)

        return {
            "design": cfg.design.name,
            "prompt_machines": None if baseline else cfg.prompt_machines,
            "token_machines": None if baseline else cfg.token_machines,
            "machines": cfg.machines,
            "engine": self.engine,
            "requests": self.requests,
            "completed": self.completed,
            "slowdown": {k: clean(self.slowdown[k]) for k in SLO_KEYS},
            "latency_s": {k: clean(self.latency_s[k]) for k in SLO_KEYS},
            "meets_slo": self.meets_slo,
            "binding_slo": self.verdict.binding,
            "slo_headroom": clean(self.verdict.headroom),
            "stable": self.stable,
            "cost_usd_per_h": round(cfg.cost_usd_per_h, 6),
            "power_kw": round(cfg.power_kw, 6),
            "throughput_rps": clean(self.throughput_rps),
            "utilization": {k: clean(v) for k, v in self.utilization.items()},
            "sim_wall_s": round(self.sim_wall_s, 6),
            "notes": list(self.notes),
        }
