"""Layer 6: output column sets as named constants, and the metadata stamped on every table."""

from __future__ import annotations

from typing import Any

from splitplan._version import __version__
from splitplan.search.result import POINT_COLUMNS

SCHEMA_VERSION = "1"

# One row per evaluated point of a search. `decided_by`: "des" (simulated), "dominance" (implied by
# a DES-decided point with more machines that fails, or fewer that passes), "analytic" (screen only).
# The nine slowdown columns are DES values where decided_by == "des", the analytic screen's
# otherwise; `rate_rps` is the load the point was judged at (throughput searches probe many). The
# nine latency columns (`ttft_p50_s` … `e2e_p99_s`, seconds) follow the same rule.
SEARCH_COLUMNS: tuple[str, ...] = POINT_COLUMNS


def search_schema() -> Any:
    """The pyarrow schema of `search --out` (report.output_schema, shared by every parquet file)."""
    from splitplan.report.output_schema import arrow_schema

    return arrow_schema("search-points")


def metadata(**extra: object) -> dict[str, str]:
    """Provenance stamped into parquet metadata: schema version, splitplan version, inputs."""
    out = {"schema_version": SCHEMA_VERSION, "splitplan_version": __version__}
    out.update({k: str(v) for k, v in extra.items()})
    return out
