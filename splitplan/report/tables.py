"""Layer 6: result tables as pyarrow, written to parquet atomically (temp file + rename)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from splitplan._io import write_with
from splitplan.errors import InputError
from splitplan.report.schema import SEARCH_COLUMNS, metadata, search_schema


def points_table(points: Sequence[Mapping[str, object]], **meta: object) -> Any:
    """Every evaluated point of a search as a table with SEARCH_COLUMNS (missing values → null)."""
    import pyarrow as pa

    schema = search_schema()
    cols = {name: [p.get(name) for p in points] for name in SEARCH_COLUMNS}
    table = pa.table(
        {name: pa.array(cols[name], type=schema.field(name).type) for name in SEARCH_COLUMNS}, schema=schema
    )
    return table.replace_schema_metadata(metadata(**meta))


def write_parquet_atomic(table: Any, path: str | Path) -> Path:
    """Write `table` to `path` so readers see either the old file or the complete new one."""
    import pyarrow.parquet as pq

    target = Path(path)
    if target.suffix.lower() != ".parquet":
        raise InputError(f"output file must end in .parquet, got {target.name}")
    write_with(target, lambda tmp: pq.write_table(table, tmp))
    return target
