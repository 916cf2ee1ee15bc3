"""Layer 4 — simulators: from (cluster configuration, scenario) to latencies, slowdowns, verdict."""

from __future__ import annotations

from typing import Literal

from splitplan.design import ClusterConfig
from splitplan.errors import InputError
from splitplan.sim.config import SimConfig, load_config
from splitplan.sim.result import RequestMetrics, SimResult
from splitplan.sim.scenario import Scenario

Engine = Literal["des", "analytic"]


def simulate(config: ClusterConfig, scenario: Scenario, engine: str = "des") -> SimResult:
    """Simulate one configuration with the discrete-event simulator or the analytic evaluator."""
    if engine == "des":
        from splitplan.sim.des import simulate_des

        return simulate_des(config, scenario)
    if engine == "analytic":
        from splitplan.sim.analytic import simulate_analytic

        return simulate_analytic(config, scenario)
    raise InputError(f"unknown engine {engine!r} (expected des or analytic)")


__all__ = ["Engine", "RequestMetrics", "Scenario", "SimConfig", "SimResult", "load_config", "simulate"]
