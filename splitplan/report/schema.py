"""Layer 6: output column sets as named constants, and the metadata stamped on every table."""

from __future__ import annotations

from typing import Any

from splitplan._version import __version__
from splitplan.search.result import POINT_KEYS
from splitplan.slo import SLO_KEYS

SCHEMA_VERSION = "1"

# One row per evaluated point of a search. `decided_by`: "des" (simulated), "dominance" (implied by
# a DES-decided point with more machines that fails, or fewer that passes), "analytic" (screen only).
# The nine slowdown columns are DES values where decided_by == "des", the analytic screen's
# otherwise; `rate_rps` is the load the point was judged at (throughput searches probe many).
SEARCH_COLUMNS: tuple[str, ...] = POINT_KEYS + SLO_KEYS

_INT = (
    "prompt_machines",
    "token_machines",
    "machines",
    "prompt_instances",
    "token_instances",
    "instances",
    "prompt_tp",
    "token_tp",
)
_BOOL = ("within_budget", "meets_slo")
_STR = (
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


def search_schema() -> Any:
    """The pyarrow schema of `search --out` (pyarrow imported here, not at import time)."""
    import pyarrow as pa

    fields = []
    for name in SEARCH_COLUMNS:
        if name in _INT:
            typ = pa.int64()
        elif name in _BOOL:
            typ = pa.bool_()
        elif name in _STR:
            typ = pa.string()
        else:
            typ = pa.float64()
        fields.append(pa.field(name, typ))
    return pa.schema(fields)


def metadata(**extra: object) -> dict[str, str]:
    """Provenance stamped into parquet metadata: schema version, splitplan version, inputs."""
    out = {"schema_version": SCHEMA_VERSION, "splitplan_version": __version__}
    out.update({k: str(v) for k, v in extra.items()})
    return out
