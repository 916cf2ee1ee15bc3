"""Layer 6: result tables as pyarrow, written to parquet atomically (temp file + rename)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from splitplan._io import write_with
from splitplan.errors import InputError
from splitplan.report.schema import metadata
from splitplan.search.result import PointRecord, point_columns


def points_table(
    points: Sequence[PointRecord], *, context: Mapping[str, Any] | None = None, **meta: object
) -> Any:
    """Every evaluated point of a search as a table with SEARCH_COLUMNS (unknown values → null);
    `meta` as flat metadata keys, `context` (e.g. the full request) into the JSON document."""
    from splitplan.report.output_schema import build_table

    cols = point_columns(points)
    doc = {**meta, **dict(context or {})}
    return build_table("search-points", cols, command="search", context=doc, legacy=metadata(**meta))


def write_parquet_atomic(table: Any, path: str | Path) -> Path:
    """Write `table` to `path` so readers see either the old file or the complete new one."""
    import pyarrow.parquet as pq

    target = Path(path)
    if target.suffix.lower() != ".parquet":
        raise InputError(f"output file must end in .parquet, got {target.name}")
    write_with(target, lambda tmp: pq.write_table(table, tmp))
    return target
