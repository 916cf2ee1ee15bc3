"""Layer 7 — the Python twin of every CLI command: typed requests in, typed results out.

No printing and no typer here; the CLI renders what these return.
"""

from splitplan.api._catalog import CatalogListing, catalog
from splitplan.api._heatmap import HeatmapResult, heatmap
from splitplan.api._pareto import pareto
from splitplan.api._perf import CheckResult, PerfFitResult, perf_check, perf_fit
from splitplan.api._plan import (
    export_plan,
    search_metrics,
    search_plan,
    simulation_metrics,
    simulation_plan,
)
from splitplan.api._search import SearchRequest, search
from splitplan.api._simulate import WorkloadRequest, build_scenario, simulate
from splitplan.api._trace import (
    ColumnStats,
    TraceStats,
    TraceWritten,
    trace_convert,
    trace_generate,
    trace_stats,
    workload_stats,
)
from splitplan.design import ClusterConfig, Design, custom_design, get_design

__all__ = [
    "CatalogListing",
    "CheckResult",
    "ClusterConfig",
    "ColumnStats",
    "Design",
    "HeatmapResult",
    "PerfFitResult",
    "SearchRequest",
    "TraceStats",
    "TraceWritten",
    "WorkloadRequest",
    "build_scenario",
    "catalog",
    "custom_design",
    "export_plan",
    "get_design",
    "heatmap",
    "pareto",
    "perf_check",
    "perf_fit",
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
