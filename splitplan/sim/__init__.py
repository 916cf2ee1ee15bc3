"""Layer 4 — simulators: from (cluster configuration, scenario) to latencies, slowdowns, verdict."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from splitplan.design import ClusterConfig
from splitplan.errors import InputError
from splitplan.sim.config import SimConfig, load_config
from splitplan.sim.result import RequestMetrics, SimResult
from splitplan.sim.scenario import Scenario

Engine = Literal["des", "analytic"]  # the type of `engine` below; SimEngine is its enum


class SimEngine(StrEnum):
    """What simulates one configuration: the discrete-event simulator or the analytic evaluator."""

    DES = "des"
    ANALYTIC = "analytic"


def simulate(config: ClusterConfig, scenario: Scenario, engine: str = "des") -> SimResult:
    """Simulate one configuration with the discrete-event simulator or the analytic evaluator."""
    if engine == "des":
        from splitplan.sim.des import simulate_des

        return simulate_des(config, scenario)
    if engine == "analytic":
        from splitplan.sim.analytic import simulate_analytic

        return simulate_analytic(config, scenario)
    known = " or ".join(e.value for e in SimEngine)
    raise InputError(f"unknown engine {engine!r} (expected {known})")


__all__ = [
    "Engine",
    "RequestMetrics",
    "Scenario",
    "SimConfig",
    "SimEngine",
    "SimResult",
    "load_config",
    "simulate",
]
