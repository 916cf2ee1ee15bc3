"""`splitplan pareto` as a library function: the fronts of a search's points (file or fresh run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from splitplan.api._search import SearchRequest, search
from splitplan.errors import InputError
from splitplan.report.pareto import ParetoFronts, pareto_fronts
from splitplan.search import SearchOutcome

_NEEDED = ("design", "machines", "meets_slo", "cost_usd_per_h", "power_kw", "rate_rps")


def _from_parquet(path: Path) -> list[dict[str, Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"cannot read {path} as parquet: {str(exc).splitlines()[0]}") from None
    missing = [c for c in _NEEDED if c not in table.column_names]
    if missing:
        raise InputError(f"{path} is not a `search --out` file: no column(s) {', '.join(missing)}")
    return table.to_pylist()


def _from_json(path: Path) -> list[dict[str, Any]]:
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is not valid JSON: {exc}") from None
    results = doc.get("results") if isinstance(doc, dict) else None
    if not isinstance(results, list):
        raise InputError(f"{path} is not a `search --json` document: it has no results list")
    rows = []
    for r in results:
        if not isinstance(r, dict) or any(k not in r for k in _NEEDED):
            raise InputError(f"{path}: every result needs {', '.join(_NEEDED)}")
        rows.append(dict(r, decided_by=r.get("verified_by"), within_budget=True))
    return rows


def read_points(path: str | Path) -> list[dict[str, Any]]:
    """Points of a `search --out` parquet file (every evaluated point) or of a `search --json`
    document (each design's best only)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"search output {p} does not exist")
    suffix = p.suffix.lower()
    if suffix == ".parquet":
        return _from_parquet(p)
    if suffix == ".json":
        return _from_json(p)
    raise InputError(f"pareto reads a search's .parquet (--out) or .json (--json) output, got {p.name}")


def pareto(
    source: str | Path | SearchOutcome | SearchRequest | None = None, **search_kw: Any
) -> ParetoFronts:
    """Fronts across designs: from a search output file, a SearchOutcome, or a search run now
    (`source` a SearchRequest or None for the default search; `search_kw` go to `api.search`)."""
    if isinstance(source, str | Path):
        return pareto_fronts(read_points(source), source=str(source))
    if isinstance(source, SearchOutcome):
        return pareto_fronts([p.row() for p in source.points], source="search")
    outcome = search(source, **search_kw)
    return pareto_fronts([p.row() for p in outcome.points], source="search")
