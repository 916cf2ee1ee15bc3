"""Layer 7 — the Python twin of every CLI command: typed requests in, typed results out.

No printing and no typer here; the CLI parses its strings into these types and renders what they
return. Every CLI command has a twin here (tests/unit/test_api_contract.py holds the map):

    search → search(SearchRequest)            simulate → simulate(config, scenario)
    heatmap → heatmap(design, scenario, …)    reproduce → reproduce(ReproduceRequest)
    catalog → catalog()                        perf check / fit → perf_check / perf_fit
    trace generate / stats / convert → trace_generate / trace_stats / trace_convert
"""

from splitplan.api._catalog import CatalogListing, catalog
from splitplan.api._heatmap import HeatmapPoint, HeatmapResult, heatmap
from splitplan.api._perf import CheckResult, PerfFitResult, perf_check, perf_fit
from splitplan.api._reproduce import Comparison, ReproduceReport, ReproduceRequest, reproduce
from splitplan.api._search import SearchRequest, search
from splitplan.api._simulate import WorkloadRequest, build_scenario, make_config, resolve_design, simulate
from splitplan.api._trace import (
    ColumnStats,
    TraceStats,
    TraceWritten,
    trace_convert,
    trace_generate,
    trace_stats,
    workload_stats,
)
from splitplan.design import PAPER_DESIGNS, ClusterConfig, Design, custom_design, get_design
from splitplan.search import DesignResult, Engine, Method, Objective, SearchOutcome
from splitplan.sim import Scenario, SimConfig, SimResult, load_config
from splitplan.slo import SloSpec, load_slo

__all__ = [
    "PAPER_DESIGNS",
    "CatalogListing",
    "CheckResult",
    "ClusterConfig",
    "ColumnStats",
    "Comparison",
    "Design",
    "DesignResult",
    "Engine",
    "HeatmapPoint",
    "HeatmapResult",
    "Method",
    "Objective",
    "PerfFitResult",
    "ReproduceReport",
    "ReproduceRequest",
    "Scenario",
    "SearchOutcome",
    "SearchRequest",
    "SimConfig",
    "SimResult",
    "SloSpec",
    "TraceStats",
    "TraceWritten",
    "WorkloadRequest",
    "build_scenario",
    "catalog",
    "custom_design",
    "get_design",
    "heatmap",
    "load_config",
    "load_slo",
    "make_config",
    "perf_check",
    "perf_fit",
    "reproduce",
    "resolve_design",
    "search",
    "simulate",
    "trace_convert",
    "trace_generate",
    "trace_stats",
    "workload_stats",
]
