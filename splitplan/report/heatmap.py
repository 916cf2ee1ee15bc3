"""Layer 6: the `heatmap` table — one row per (prompt, token) point — as pyarrow, with provenance.

Columns (HEATMAP_COLUMNS): the pool sizes, the nine slowdown percentiles under their SLO keys
(`ttft_p50` … `e2e_p99`, as in `search --out`), the all-nine verdict, stability, the binding
margin (slo.slo_margins: min over limits of limit / value − 1; negative = fails), utilizations,
cost, power and what decided the point ("des", "dominance" from DES-decided points, or
"analytic"). Schema version, splitplan version, design, workload, model, rate, seed and engine are
stamped into the parquet metadata.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from splitplan.report.schema import metadata
from splitplan.report.tables import write_parquet_atomic
from splitplan.slo import SLO_KEYS

HEATMAP_COLUMNS: tuple[str, ...] = (
    "prompt_machines",
    "token_machines",
    *SLO_KEYS,
    "meets_slo",
    "stable",
    "margin",
    "utilization_prompt",
    "utilization_token",
    "cost_usd_per_h",
    "power_kw",
    "engine",
)

_INT = ("prompt_machines", "token_machines")
_BOOL = ("meets_slo", "stable")
_STR = ("engine",)


def heatmap_schema() -> Any:
    """The pyarrow schema of `heatmap --out` (pyarrow imported here, not at import time)."""
    import pyarrow as pa

    def typ(name: str) -> Any:
        if name in _INT:
            return pa.int64()
        if name in _BOOL:
            return pa.bool_()
        if name in _STR:
            return pa.string()
        return pa.float64()

    return pa.schema([pa.field(name, typ(name)) for name in HEATMAP_COLUMNS])


def heatmap_table(columns: Mapping[str, Sequence[Any] | np.ndarray], **meta: object) -> Any:
    """A table from per-point columns keyed by HEATMAP_COLUMNS; `meta` goes to the metadata."""
    import pyarrow as pa

    schema = heatmap_schema()
    arrays = []
    for name in HEATMAP_COLUMNS:
        values = columns[name]
        if isinstance(values, np.ndarray) and values.dtype.kind == "f":
            # non-finite slowdowns (none are expected) are stored as null, never as NaN
            arrays.append(pa.array(values, type=pa.float64(), mask=~np.isfinite(values)))
        else:
            arrays.append(
                pa.array(
                    list(values) if isinstance(values, np.ndarray) and values.dtype.kind == "U" else values,
                    type=schema.field(name).type,
                )
            )
    table = pa.Table.from_arrays(arrays, schema=schema)
    return table.replace_schema_metadata(metadata(table="heatmap", **meta))


def write_heatmap(table: Any, path: str | Path) -> Path:
    """Write atomically (readers see the old file or the complete new one)."""
    return write_parquet_atomic(table, path)
