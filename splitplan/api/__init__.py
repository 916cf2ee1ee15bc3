"""Layer 7 — the Python twin of every CLI command: typed requests in, typed results out.

No printing and no typer here; the CLI parses its strings into these types and renders what they
return. Every CLI command has a twin here (tests/unit/test_api_contract.py holds the map):

    search → search(SearchRequest)            simulate → simulate(config, scenario)
    heatmap → heatmap(design, scenario, …)    reproduce → reproduce(ReproduceRequest)
    catalog → catalog()                        perf check / fit → perf_check / perf_fit
    pareto → pareto(source)                    search/simulate --export-plan → export_plan(plan)
    trace generate / stats / convert → trace_generate / trace_stats / trace_convert
"""

from splitplan.api._catalog import CatalogListing, ImportedModel, catalog, catalog_import_hf
from splitplan.api._heatmap import HeatmapPoint, HeatmapResult, heatmap
from splitplan.api._pareto import pareto
from splitplan.api._perf import CheckResult, PerfFitResult, perf_check, perf_fit
from splitplan.api._plan import (
    export_plan,
    search_metrics,
    search_plan,
    simulation_metrics,
    simulation_plan,
)
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
    "ImportedModel",
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
    "catalog_import_hf",
    "custom_design",
    "export_plan",
    "get_design",
    "heatmap",
    "load_config",
    "load_slo",
    "make_config",
    "pareto",
    "perf_check",
    "perf_fit",
    "reproduce",
    "resolve_design",
    "search",
    "search_metrics",
    "search_plan",
    "simulate",
    "simulation_metrics",
    "simulation_plan",
    "trace_convert",
    "trace_generate",
    "trace_stats",
    "workload_stats",
]
