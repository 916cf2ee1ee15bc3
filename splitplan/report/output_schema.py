"""Layer 6: one schema for every parquet file splitplan writes — search points (`search --out`),
heatmaps (`heatmap --out`) and per-request results (`simulate --requests-out`).

One module decides, for all three: column types (nullable integers stay integers, also in pandas),
units (named in each field's metadata and by the name's suffix), the null convention, and the
metadata — one JSON document under the key `splitplan` (schema and splitplan versions, kind,
command, the scenario, model, SLO limits, seed, software stack, and per column its unit).

Null convention: a value that was not measured, or that has no finite value, is null — never NaN,
±inf or a sentinel. In particular the margin of an unstable point (queues grow without bound) is
null, and `stable` says why. Earlier flat metadata keys are still written beside `splitplan`, so
readers of schema version 1 keep working.
"""

from __future__ import annotations

import json
import math
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from splitplan._version import __version__
from splitplan.search.result import POINT_COLUMNS
from splitplan.sim.result import RequestMetrics
from splitplan.slo import LATENCY_COLUMNS, SLO_KEYS

SCHEMA_VERSION = "3"  # 3: search points gained des_stopped
METADATA_KEY = "splitplan"
KINDS: tuple[str, ...] = ("search-points", "heatmap", "requests")
# margins at or below this are how an unbounded (unstable) margin is carried in memory; stored null
UNBOUNDED_MARGIN = -1e9


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: str  # "int64" | "float64" | "bool" | "string"
    unit: str
    description: str = ""


def unit_of(name: str) -> str:
    """The unit a column's name says (one naming rule for every file)."""
    if name in SLO_KEYS or name.endswith("_slowdown"):
        return "ratio to the request alone on a DGX-A100"
    if "margin" in name or name == "slo_headroom":
        return "fraction (limit ÷ value − 1)"
    if name.startswith("utilization"):
        return "fraction"
    if name.endswith("power_cap"):
        return "fraction of TDP"
    for suffix, unit in (
        ("_usd_per_h", "USD/h"),
        ("_kw", "kW"),
        ("_rps", "requests/s"),
        ("_s", "s"),
        ("_tokens", "tokens"),
        ("_instances", "instances"),
        ("instances", "instances"),
        ("_machines", "nodes"),
        ("machines", "nodes"),
        ("_tp", "GPUs per instance"),
        ("preemptions", "count"),
    ):
        if name.endswith(suffix):
            return unit
    return ""


_SEARCH_INT = (
    "prompt_machines",
    "token_machines",
    "machines",
    "prompt_instances",
    "token_instances",
    "instances",
    "prompt_tp",
    "token_tp",
)
_SEARCH_BOOL = ("within_budget", "meets_slo", "des_stopped")
_SEARCH_STR = (
    "design",
    "prompt_gpu",
    "token_gpu",
    "decided_by",
    "binding_slo",
    "prompt_precision",
    "token_precision",
    "prompt_kv_precision",
    "token_kv_precision",
)
_HEATMAP_NAMES = (
    "prompt_machines",
    "token_machines",
    *SLO_KEYS,
    *LATENCY_COLUMNS,
    "meets_slo",
    "stable",
    "margin",
    "utilization_prompt",
    "utilization_token",
    "cost_usd_per_h",
    "power_kw",
    "engine",
)
# per-request columns are RequestMetrics' fields, in order (one home: sim.result)
_REQUEST_NAMES = tuple(f.name for f in fields(RequestMetrics))
_DESCRIPTIONS = {
    "decided_by": "des (simulated), dominance (implied by a DES-decided point) or analytic (screen only)",
    "engine": "what decided the point: des (simulated), dominance (implied by a DES point) or analytic",
    "binding_slo": "the SLO with least headroom; a latency limit ends in _latency",
    "prompt_machine": "index of the prompt instance that served the request",
    "token_machine": "index of the token instance that served the request",
    "margin": "SLO headroom of the binding SLO; null when it has no finite value (unstable in the DES)",
    "des_margin": "DES SLO headroom; null when not simulated, unbounded (unstable) or des_stopped",
    "des_stopped": "true: the DES run stopped once binding_slo was certain to end with a headroom "
    "below -0.1 or lower (a large search needs no more of a clear failure); des_margin and the "
    "percentiles are null",
    "analytic_margin": "analytic-screen SLO headroom; null when not screened",
    **{
        col: f"{key} latency percentile over requests (DES where simulated, else the screen); null "
        "when not measured or unbounded"
        for key, col in zip(SLO_KEYS, LATENCY_COLUMNS, strict=True)
    },
}


def _typ(kind: str, name: str) -> str:
    if kind == "search-points":
        if name in _SEARCH_INT:
            return "int64"
        if name in _SEARCH_BOOL:
            return "bool"
        return "string" if name in _SEARCH_STR else "float64"
    if kind == "heatmap":
        if name in ("prompt_machines", "token_machines"):
            return "int64"
        if name in ("meets_slo", "stable"):
            return "bool"
        return "string" if name == "engine" else "float64"
    if name in ("prompt_tokens", "output_tokens", "prompt_machine", "token_machine", "preemptions"):
        return "int64"
    return "float64"


def columns(kind: str) -> tuple[Column, ...]:
    """The columns of one file kind, in file order."""
    names = {"search-points": POINT_COLUMNS, "heatmap": _HEATMAP_NAMES, "requests": _REQUEST_NAMES}
    if kind not in names:
        raise ValueError(f"unknown output kind {kind!r} (known: {', '.join(KINDS)})")
    return tuple(Column(n, _typ(kind, n), unit_of(n), _DESCRIPTIONS.get(n, "")) for n in names[kind])


def arrow_schema(kind: str) -> Any:
    """The pyarrow schema of `kind`, each field carrying its unit and description."""
    import pyarrow as pa

    types = {"int64": pa.int64(), "float64": pa.float64(), "bool": pa.bool_(), "string": pa.string()}
    return pa.schema(
        [
            pa.field(c.name, types[c.type], metadata={"unit": c.unit, "description": c.description})
            for c in columns(kind)
        ]
    )


def _stack() -> dict[str, str]:
    import pyarrow as pa

    return {"python": platform.python_version(), "numpy": np.__version__, "pyarrow": pa.__version__}


def metadata_document(kind: str, *, command: str, context: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON document stored under `splitplan` (context: scenario, model, slo, seed, …)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "splitplan_version": __version__,
        "kind": kind,
        "command": command,
        **{k: v for k, v in context.items() if k not in ("schema_version", "splitplan_version", "kind")},
        "stack": _stack(),
        "columns": {c.name: {"type": c.type, "unit": c.unit} for c in columns(kind)},
        "nulls": "null = not measured or no finite value (an unbounded margin); never NaN or inf",
    }


def _pandas_metadata(kind: str) -> str:
    """pandas metadata so `to_pandas()` keeps nullable integers as Int64 (not float64) and booleans
    as boolean."""
    ext = {"int64": "Int64", "bool": "boolean", "float64": "float64", "string": "object"}
    pandas_type = {"int64": "int64", "bool": "bool", "float64": "float64", "string": "unicode"}
    return json.dumps(
        {
            "index_columns": [],
            "column_indexes": [],
            "columns": [
                {
                    "name": c.name,
                    "field_name": c.name,
                    "pandas_type": pandas_type[c.type],
                    "numpy_type": ext[c.type],
                    "metadata": None,
                }
                for c in columns(kind)
            ],
            "creator": {"library": "splitplan", "version": __version__},
            "pandas_version": "2.0.0",
        }
    )


def _clean_floats(name: str, values: Any) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(values, np.ndarray):
        values = [np.nan if v is None else v for v in values]
    arr = np.asarray(values, dtype=np.float64)
    null = ~np.isfinite(arr)
    if "margin" in name:
        null |= arr <= UNBOUNDED_MARGIN
    return arr, null


def build_table(
    kind: str,
    data: Mapping[str, Sequence[Any] | np.ndarray],
    *,
    command: str,
    context: Mapping[str, Any] | None = None,
    legacy: Mapping[str, str] | None = None,
) -> Any:
    """A pyarrow table of `kind` from column data (missing columns → all null), with the schema's
    types, null convention and metadata (`legacy`: flat schema-1 keys kept beside it)."""
    import pyarrow as pa

    schema = arrow_schema(kind)
    n = max((len(v) for v in data.values()), default=0)
    arrays = []
    for field in schema:
        values = data.get(field.name)
        if values is None:
            arrays.append(pa.nulls(n, type=field.type))
        elif pa.types.is_floating(field.type):
            arr, null = _clean_floats(field.name, values)
            arrays.append(pa.array(arr, type=field.type, mask=null))
        else:
            vals = values.tolist() if isinstance(values, np.ndarray) else list(values)
            arrays.append(pa.array(vals, type=field.type))
    table = pa.Table.from_arrays(arrays, schema=schema)
    doc = metadata_document(kind, command=command, context=context or {})
    meta = {str(k): str(v) for k, v in (legacy or {}).items()}
    meta[METADATA_KEY] = json.dumps(doc, allow_nan=False, default=_jsonable)
    meta["pandas"] = _pandas_metadata(kind)
    return table.replace_schema_metadata(meta)


def _jsonable(x: Any) -> Any:
    if isinstance(x, Path):
        return str(x)
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, tuple | set | frozenset):
        return list(x)
    return str(x)


def read_metadata(source: Any) -> dict[str, Any]:
    """The `splitplan` metadata document of a table, a schema or a parquet path."""
    if isinstance(source, str | Path):
        import pyarrow.parquet as pq

        schema = pq.read_schema(source)
    else:
        schema = getattr(source, "schema", source)
    raw = (schema.metadata or {}).get(METADATA_KEY.encode())
    if raw is None:
        raise ValueError("no splitplan metadata (written by splitplan before schema version 2?)")
    return json.loads(raw)
