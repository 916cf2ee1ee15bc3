"""Layer 4: everything but the cluster sizes that a simulation needs, bundled once.

A Scenario is built at the boundary (CLI/API) and shared by every evaluation of a search, so the
per-machine performance tables are computed once per design, not once per point.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from splitplan.catalog import Machine, ModelSpec, get_machine_type
from splitplan.perf import PerfModel, get_perf_model
from splitplan.sim.config import SimConfig
from splitplan.slo import SloSpec
from splitplan.workload.base import Workload

REFERENCE_MACHINE = "dgx-a100"  # slowdowns are relative to the request alone on a DGX-A100


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    workload: Workload
    model: ModelSpec
    perf: str = "analytic"  # "analytic" or the path of a profile CSV
    slo: SloSpec = field(default_factory=SloSpec)
    sim: SimConfig = field(default_factory=SimConfig)
    seed: int = 0

    def perf_model(self, machine: Machine) -> PerfModel:
        return _perf_cached(self.perf, self.model, machine, self.sim.profile_prompt_curves)

    def reference_perf(self) -> PerfModel:
        return self.perf_model(Machine(type=get_machine_type(REFERENCE_MACHINE)))

    @property
    def weight_bytes(self) -> float:
        return float(self.sim.weight_bytes.get(self.model.name, self.model.weight_bytes))

    @property
    def kv_bytes_per_token(self) -> float:
        if self.sim.kv_bytes == "no_gqa":
            return self.model.kv_bytes_per_token_no_gqa
        return self.model.kv_bytes_per_token

    def weight_bytes_on(self, machine: Machine) -> float:
        """Weights held by one instance of `machine`: the config's override, else the model's
        weights at the instance's weight precision."""
        if self.model.name in self.sim.weight_bytes:
            return float(self.sim.weight_bytes[self.model.name])
        return self.model.weight_bytes_at(machine.weight_precision)

    def kv_bytes_per_token_on(self, machine: Machine) -> float:
        """KV bytes per token cached on `machine`, at its KV precision (native dtype = 2 bytes
        gives `kv_bytes_per_token`)."""
        return self.kv_bytes_per_token * machine.kv_precision.bytes_per_value / self.model.dtype_bytes


_PERF_CACHE: dict[tuple[str, str, Machine, str], PerfModel] = {}


def _perf_cached(perf: str, model: ModelSpec, machine: Machine, prompt_curves: str) -> PerfModel:
    # Perf models are immutable; caching by value keeps searches from rebuilding them per point.
    key = (str(Path(perf)) if perf != "analytic" else perf, model.name, machine, prompt_curves)
    if key not in _PERF_CACHE:
        _PERF_CACHE[key] = get_perf_model(perf, model, machine, prompt_curves)
    return _PERF_CACHE[key]
