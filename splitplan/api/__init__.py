"""Layer 7 — the Python twin of every CLI command: typed requests in, typed results out.

No printing and no typer here; the CLI renders what these return.
"""

from splitplan.api._catalog import CatalogListing, catalog
from splitplan.api._perf import CheckResult, PerfFitResult, perf_check, perf_fit
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

__all__ = [
    "CatalogListing",
    "CheckResult",
    "ColumnStats",
    "PerfFitResult",
    "TraceStats",
    "TraceWritten",
    "WorkloadRequest",
    "build_scenario",
    "catalog",
    "perf_check",
    "perf_fit",
    "simulate",
    "trace_convert",
    "trace_generate",
    "trace_stats",
    "workload_stats",
]
