"""Loads the TOML catalog files once; returns frozen objects only."""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path
from typing import Any

from splitplan._paths import data_dir
from splitplan.errors import CatalogError

SCHEMA_VERSION = 1


@cache
def load_table(kind: str) -> dict[str, dict[str, Any]]:
    """`kind` is gpu|machine|model; returns name → raw entry (read-only use only)."""
    path: Path = data_dir() / "catalog" / f"{kind}s.toml"
    try:
        doc = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CatalogError(f"cannot read catalog file {path}: {exc}") from exc
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise CatalogError(f"{path}: schema_version must be {SCHEMA_VERSION}")
    return dict(doc.get(kind, {}))


CATALOG_ENV = "SPLITPLAN_CATALOG"


def user_catalog_dirs() -> tuple[Path, ...]:
    """User catalog folders, in override order (later wins): `$SPLITPLAN_CATALOG`, a list joined
    with the OS path separator. Each may hold gpus.toml, machines.toml, models.toml and a `perf/`
    folder of performance-model stacks, in the shipped schema."""
    import os

    value = os.environ.get(CATALOG_ENV, "")
    return tuple(Path(p) for p in value.split(os.pathsep) if p.strip())
