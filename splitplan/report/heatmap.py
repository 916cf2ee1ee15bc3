"""Layer 6: the `heatmap` table — one row per (prompt, token) point — as pyarrow, with provenance.

Columns (HEATMAP_COLUMNS): the pool sizes, the nine slowdown percentiles under their SLO keys
(`ttft_p50` … `e2e_p99`, as in `search --out`), the all-nine verdict, stability, the binding
margin (slo.slo_margins: min over limits of limit / value − 1; negative = fails), utilizations,
cost, power and what decided the point ("des", "dominance" from DES-decided points, or
"analytic"). Types, units, nulls and metadata follow report.output_schema, as every parquet file
splitplan writes does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from splitplan.report.output_schema import columns as output_columns
from splitplan.report.schema import metadata
from splitplan.report.tables import write_parquet_atomic

HEATMAP_COLUMNS: tuple[str, ...] = tuple(c.name for c in output_columns("heatmap"))


def heatmap_schema() -> Any:
    """The pyarrow schema of `heatmap --out` (report.output_schema, shared by every parquet file)."""
    from splitplan.report.output_schema import arrow_schema

    return arrow_schema("heatmap")


def heatmap_table(columns: Mapping[str, Sequence[Any] | np.ndarray], **meta: object) -> Any:
    """A table from per-point columns keyed by HEATMAP_COLUMNS; `meta` goes to the metadata (flat
    keys, and the `splitplan` JSON document with the SLO limits parsed back into numbers)."""
    from splitplan.report.output_schema import build_table

    context: dict[str, Any] = dict(meta)
    slo = str(meta.get("slo_slowdown", ""))
    if slo:
        context["slo"] = {"slowdown": {k: float(v) for k, v in (kv.split("=", 1) for kv in slo.split(";"))}}
        context.pop("slo_slowdown")
    wl = str(meta.get("workload_meta", ""))
    if wl:
        context["workload_meta"] = dict(kv.split("=", 1) for kv in wl.split(";") if "=" in kv)
    legacy = metadata(table="heatmap", **meta)
    return build_table("heatmap", columns, command="heatmap", context=context, legacy=legacy)


def write_heatmap(table: Any, path: str | Path) -> Path:
    """Write atomically (readers see the old file or the complete new one)."""
    return write_parquet_atomic(table, path)
